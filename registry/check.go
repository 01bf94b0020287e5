package registry

import (
	"errors"
	"fmt"
	"time"
)

// The checks below are the Go half of the store's contract: every backend
// runs them on what it is asked to write (and a backend that checks on its
// server, as the Redis store's scripts do, keeps its copy in step with
// Check).

// Validate reports the first required field of h that is empty.
func (h Home) Validate() error {
	if h.ID == "" {
		return errors.New("id is empty")
	}
	if h.Target == "" {
		return errors.New("target is empty")
	}
	return nil
}

// Check compares a stored record's generation and owner (found reports
// whether one exists) with the writer's condition c (DESIGN rule 15). A
// create (c.Generation 0) fails with ErrConflict on an existing record; an
// update of a missing record fails with ErrNotFound; any other mismatch is
// ErrConflict. The fence is checked apart (Fence.Check).
func (c Cond) Check(found bool, gen uint64, owner string) error {
	switch {
	case c.Generation == 0 && found:
		return fmt.Errorf("create: exists at generation %d: %w", gen, ErrConflict)
	case c.Generation == 0:
		return nil
	case !found:
		return fmt.Errorf("expected generation %d: %w", c.Generation, ErrNotFound)
	}
	return c.mismatch(gen, owner)
}

// CheckDelete is Check for a delete: a missing record is ErrNotFound, and
// a cond with Generation 0 never matches a stored record.
func (c Cond) CheckDelete(found bool, gen uint64, owner string) error {
	if !found {
		return ErrNotFound
	}
	return c.mismatch(gen, owner)
}

// mismatch is ErrConflict unless gen and owner are c's.
func (c Cond) mismatch(gen uint64, owner string) error {
	if gen != c.Generation || owner != c.Owner {
		return fmt.Errorf("stored generation %d owner %q, expected generation %d owner %q: %w",
			gen, owner, c.Generation, c.Owner, ErrConflict)
	}
	return nil
}

// CheckLease validates the arguments of Lock.
func CheckLease(name, holder string, ttl time.Duration) error {
	switch {
	case name == "":
		return errors.New("lock name is empty")
	case holder == "":
		return errors.New("holder is empty")
	case ttl <= 0:
		return fmt.Errorf("ttl %s is not positive", ttl)
	}
	return nil
}

// CheckReport validates the arguments of ReportSessions.
func CheckReport(instance string, counts map[string]int, ttl time.Duration) error {
	if instance == "" {
		return errors.New("instance is empty")
	}
	if ttl <= 0 {
		return fmt.Errorf("ttl %s is not positive", ttl)
	}
	for home, n := range counts {
		if n < 0 {
			return fmt.Errorf("home %s: negative count %d", home, n)
		}
	}
	return nil
}
