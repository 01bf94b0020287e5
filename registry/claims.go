package registry

import (
	"context"
	"errors"
	"fmt"
	"strconv"
)

// The target index: one record per target, naming the home that routes
// /node/{target}. A home's target is unique because the index record is
// written with the same compare-and-set on generation and owner as every
// other record, whoever writes it (the admin API of any gateway of a fleet,
// the config at start, the store at start). The protocol, in the helpers
// below (ClaimTarget, ConfirmClaim, ReleaseClaim, ForceClaim):
//
//  1. claim: create the record, or take over a stale one (its home's
//     record does not exist or names another target: a writer crashed
//     between its claim and its home record, or moved the home);
//  2. write the home record, naming the target;
//  3. confirm: write the claim again (compare-and-set on the claim as
//     taken). A confirm that fails means another writer judged the claim
//     stale between 1 and 2 and took it: the home record is undone and the
//     target is not the writer's.
//
// Removing a home, or moving it to another target, releases its claim; a
// release that does not happen (a crash) leaves a stale claim, which the
// next claimant takes over.

// Claim is the index record of one target.
type Claim struct {
	// Target is the name in /node/{target}; the record's key.
	Target string `json:"target"`
	// Home is the id of the home that holds the target.
	Home string `json:"home"`
	// Generation counts writes; 0 means the record has never been stored.
	Generation uint64 `json:"generation"`
	// Owner is the token of the last writer (a gateway instance).
	Owner string `json:"owner,omitempty"`
}

// ClaimCond returns the condition that matches c as it was read.
func ClaimCond(c Claim) Cond { return Cond{Generation: c.Generation, Owner: c.Owner} }

// Stamp returns c's generation and owner token.
func (c Claim) Stamp() (uint64, string) { return c.Generation, c.Owner }

// Claims is the target index of a Store, with the Store's contract:
// writes are compare-and-set on generation and owner (Cond), a missing
// claim is ErrNotFound, and every method honours its context.
type Claims interface {
	// GetClaim returns the claim on target.
	GetClaim(ctx context.Context, target string) (Claim, error)
	// ListClaims returns every claim, ordered by target.
	ListClaims(ctx context.Context) ([]Claim, error)
	// PutClaim writes c if the stored claim on c.Target matches cond.
	PutClaim(ctx context.Context, c Claim, cond Cond) (Claim, error)
	// DeleteClaim removes the claim on target if it matches cond.
	DeleteClaim(ctx context.Context, target string, cond Cond) error
}

// TakenError says that a target is claimed by another home, which is
// live: its record names the target.
type TakenError struct {
	Target string
	Holder string // the id of the home that holds the target
}

func (e *TakenError) Error() string {
	return "target " + strconv.Quote(e.Target) + " is claimed by home " + strconv.Quote(e.Holder)
}

// claimAttempts bounds the read-and-write loops of the claim helpers; each
// conflict means another writer made progress.
const claimAttempts = 8

// ClaimOutcome is what ClaimTarget did.
type ClaimOutcome struct {
	// Claim is the claim as stored, to confirm with ConfirmClaim.
	Claim Claim
	// Had is true when the home held the claim already.
	Had bool
	// Stale is the home whose stale claim was taken over ("" when none).
	Stale string
}

// ClaimTarget claims target for home (step 1 of the protocol above): the
// claim is created, kept when home holds it already, or taken over when it
// is stale. A claim held by a live home is a *TakenError.
func ClaimTarget(ctx context.Context, s Store, target, home, owner string) (ClaimOutcome, error) {
	for range claimAttempts {
		cur, err := s.GetClaim(ctx, target)
		switch {
		case errors.Is(err, ErrNotFound):
			c, err := s.PutClaim(ctx, Claim{Target: target, Home: home, Owner: owner}, Cond{})
			if errors.Is(err, ErrConflict) {
				continue
			}
			return ClaimOutcome{Claim: c}, err
		case err != nil:
			return ClaimOutcome{}, fmt.Errorf("claim target %s: %w", target, err)
		case cur.Home == home:
			return ClaimOutcome{Claim: cur, Had: true}, nil
		}
		stale, err := StaleClaim(ctx, s, cur)
		if err != nil {
			return ClaimOutcome{}, err
		}
		if !stale {
			return ClaimOutcome{}, &TakenError{Target: target, Holder: cur.Home}
		}
		c, err := s.PutClaim(ctx, Claim{Target: target, Home: home, Owner: owner}, ClaimCond(cur))
		if errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) {
			continue
		}
		return ClaimOutcome{Claim: c, Stale: cur.Home}, err
	}
	return ClaimOutcome{}, fmt.Errorf("claim target %s: %d attempts met other writers: %w", target, claimAttempts, ErrConflict)
}

// StaleClaim reports whether c may be taken over: its home's record does
// not exist or names another target.
func StaleClaim(ctx context.Context, s Store, c Claim) (bool, error) {
	h, err := s.GetHome(ctx, c.Home)
	switch {
	case errors.Is(err, ErrNotFound):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("claim target %s: read holder %s: %w", c.Target, c.Home, err)
	}
	return h.Target != c.Target, nil
}

// ConfirmClaim confirms c, as ClaimTarget returned it, once its home's
// record names the target (step 3 of the protocol above). When another
// writer took the claim meanwhile it returns a *TakenError naming the
// holder: the caller undoes its home record.
func ConfirmClaim(ctx context.Context, s Store, c Claim, owner string) (Claim, error) {
	next := c
	next.Owner = owner
	stored, err := s.PutClaim(ctx, next, ClaimCond(c))
	if !errors.Is(err, ErrConflict) && !errors.Is(err, ErrNotFound) {
		return stored, err
	}
	cur, rerr := s.GetClaim(ctx, c.Target)
	switch {
	case rerr == nil && cur.Home != c.Home:
		return Claim{}, &TakenError{Target: c.Target, Holder: cur.Home}
	case rerr == nil || errors.Is(rerr, ErrNotFound):
		// Released, or written again for the same home by another writer:
		// either way, not confirmed as taken. Claim it afresh.
		return Claim{}, fmt.Errorf("confirm claim on %s: %w", c.Target, err)
	}
	return Claim{}, fmt.Errorf("confirm claim on %s: %w (and reading it again: %w)", c.Target, err, rerr)
}

// ReleaseClaim removes home's claim on target; nothing when the claim is
// another home's or there is none.
func ReleaseClaim(ctx context.Context, s Store, target, home string) error {
	for range claimAttempts {
		cur, err := s.GetClaim(ctx, target)
		switch {
		case errors.Is(err, ErrNotFound):
			return nil
		case err != nil:
			return fmt.Errorf("release claim on %s: %w", target, err)
		case cur.Home != home:
			return nil
		}
		err = s.DeleteClaim(ctx, target, ClaimCond(cur))
		if !errors.Is(err, ErrConflict) && !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	return fmt.Errorf("release claim on %s: %d attempts met other writers: %w", target, claimAttempts, ErrConflict)
}

// ForceClaim gives target to home whoever holds it (the config wins). It
// returns the claim it replaced (zero when there was none or home held it
// already).
func ForceClaim(ctx context.Context, s Store, target, home, owner string) (prev Claim, err error) {
	for range claimAttempts {
		cur, err := s.GetClaim(ctx, target)
		switch {
		case errors.Is(err, ErrNotFound):
			_, err = s.PutClaim(ctx, Claim{Target: target, Home: home, Owner: owner}, Cond{})
		case err != nil:
			return Claim{}, fmt.Errorf("claim target %s: %w", target, err)
		case cur.Home == home:
			return Claim{}, nil
		default:
			_, err = s.PutClaim(ctx, Claim{Target: target, Home: home, Owner: owner}, ClaimCond(cur))
		}
		if errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) {
			continue
		}
		return cur, err
	}
	return Claim{}, fmt.Errorf("claim target %s: %d attempts met other writers: %w", target, claimAttempts, ErrConflict)
}

// validate refuses a claim without its target or home.
func (c *Claim) validate() error {
	if c.Target == "" || c.Home == "" {
		return errors.New("target and home are required")
	}
	return nil
}
