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
		stored, err := s.PutHome(ctx, rec, CondOf(cur))
		if err == nil {
			return stored, nil
		}
		if !errors.Is(err, ErrConflict) || attempt == updateAttempts {
			return Home{}, fmt.Errorf("update home %s: %w", id, err)
		}
		cur = Home{ID: id} // read again
	}
}
