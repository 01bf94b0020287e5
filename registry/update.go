package registry

import (
	"context"
	"errors"
	"fmt"
)

// updateAttempts bounds the read-modify-write loop of UpdateHome.
const updateAttempts = 5

// UpdateHome applies change to home cur (as last read; a zero Generation
// means "read it first") and stores it with a compare-and-set, stamped with
// owner. On a conflict it reads the home again and reapplies change, so
// change must set only the fields its caller owns. It returns the stored
// record.
func UpdateHome(ctx context.Context, s Store, cur Home, owner string, change func(*Home)) (Home, error) {
	return updateHome(ctx, s, cur, owner, Fence{}, change)
}

// UpdateHomeUnder is UpdateHome for the holder of lease, a lifecycle lock:
// every attempt carries the lease's fence, so the store refuses it with
// ErrLeaseLost (returned at once, never retried) once the lease is no
// longer the live one. A conflict under a live lease comes from a writer
// that takes no lock (a provider's change callback) and is reapplied like
// UpdateHome's: the fence is checked again, atomically, by each attempt, so
// a holder whose lease expired never wins a retry either.
func UpdateHomeUnder(ctx context.Context, s Store, cur Home, owner string, lease Lease, change func(*Home)) (Home, error) {
	return updateHome(ctx, s, cur, owner, FenceOf(lease), change)
}

func updateHome(ctx context.Context, s Store, cur Home, owner string, fence Fence, change func(*Home)) (Home, error) {
	id := cur.ID
	for attempt := 1; ; attempt++ {
		if cur.Generation == 0 {
			var err error
			if cur, err = s.GetHome(ctx, id); err != nil {
				return Home{}, fmt.Errorf("update home %s: %w", id, err)
			}
		}
		rec := cur
		change(&rec)
		rec.Owner = owner
		cond := CondOf(cur)
		cond.Fence = fence
		stored, err := s.PutHome(ctx, rec, cond)
		if err == nil {
			return stored, nil
		}
		if !errors.Is(err, ErrConflict) || attempt == updateAttempts {
			return Home{}, fmt.Errorf("update home %s: %w", id, err)
		}
		cur = Home{ID: id} // read again
	}
}

// DeleteHomeUnder deletes home cur (as last read) for the holder of lease,
// a lifecycle lock. As with UpdateHomeUnder, a conflict under a live lease
// comes from a writer that takes no lock (a provider's change callback,
// here or on another instance): the record is read again and the delete
// tried again, fenced each time, so a holder whose lease is lost gets
// ErrLeaseLost at once. A record that another writer deleted meanwhile is
// not an error; one that was gone before the first attempt is (ErrNotFound).
func DeleteHomeUnder(ctx context.Context, s Store, cur Home, lease Lease) error {
	id := cur.ID
	for attempt := 1; ; attempt++ {
		err := s.DeleteHome(ctx, id, CondOf(cur).Fenced(lease))
		if err == nil || (attempt > 1 && errors.Is(err, ErrNotFound)) {
			return nil
		}
		if !errors.Is(err, ErrConflict) || attempt == updateAttempts {
			return fmt.Errorf("delete home %s: %w", id, err)
		}
		if cur, err = s.GetHome(ctx, id); err != nil {
			if errors.Is(err, ErrNotFound) {
				return nil
			}
			return fmt.Errorf("delete home %s: %w", id, err)
		}
	}
}
