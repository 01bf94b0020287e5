package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Every kind of record (homes, apps, apps' desired states, target claims,
// the roll target) is stored the same way: JSON under a key in a table of
// its kind, written by a compare-and-set on generation and owner, fenced
// when the writer holds a lease (DESIGN rule 15). A backend implements
// that once, for every kind (Tables); Records[T] gives it a type here.

// Kind is one kind of record.
type Kind struct {
	// Name names a record of the kind in errors and change keys ("home").
	Name string
	// Table is where a backend keeps the kind: a bbolt bucket, the
	// suffix of a Redis hash ("homes").
	Table string
}

// The kinds of record.
var (
	KindHome     = Kind{Name: "home", Table: "homes"}
	KindApp      = Kind{Name: "app", Table: "apps"}
	KindAppState = Kind{Name: "appstate", Table: "appstates"}
	KindClaim    = Kind{Name: "claim", Table: "claims"}
	KindTarget   = Kind{Name: "target", Table: "target"}
)

// TargetRecord is the key of the one record of KindTarget.
const TargetRecord = "target"

// ChangeKey returns the key a write of key is announced on (Notifier):
// HomeKey, AppKey, AppStateKey, ClaimKey, or TargetKey.
func (k Kind) ChangeKey(key string) string {
	if k == KindTarget {
		return TargetKey
	}
	return k.Name + ":" + key
}

// Tables is the one record shape a backend implements for every kind:
// stored JSON under keys, written by compare-and-set.
//
// Contract (beside Store's): errors are not prefixed with the operation
// (Records adds it); PutRecord and DeleteRecord check the stored record's
// generation and owner against cond as Cond.Check does, and cond's fence
// as Fence.Check does, in the same atomic step as the write, and announce
// k.ChangeKey(key) once it is done.
type Tables interface {
	// GetRecord returns the stored JSON of key; ErrNotFound when none.
	GetRecord(ctx context.Context, k Kind, key string) ([]byte, error)
	// EachRecord calls fn with every record of k in key order, stopping
	// at fn's first error. raw is valid only during the call; fn must not
	// call the store.
	EachRecord(ctx context.Context, k Kind, fn func(key string, raw []byte) error) error
	// PutRecord stores raw under key if the stored record matches cond
	// (a create when cond.Generation is 0).
	PutRecord(ctx context.Context, k Kind, key string, raw []byte, cond Cond) error
	// DeleteRecord removes key if the stored record matches cond;
	// ErrNotFound when none. A cond with Generation 0 never matches.
	DeleteRecord(ctx context.Context, k Kind, key string, cond Cond) error
}

// Records is one kind of record in a store.
type Records[T Record] interface {
	// Get returns the record stored under key.
	Get(ctx context.Context, key string) (T, error)
	// List returns every record of the kind, ordered by key.
	List(ctx context.Context) ([]T, error)
	// Put writes v if the stored record matches cond (see Store). The
	// record written and returned has generation cond.Generation+1.
	Put(ctx context.Context, v T, cond Cond) (T, error)
	// Delete removes the record under key if it matches cond.
	Delete(ctx context.Context, key string, cond Cond) error
}

// records is Records over a backend's Tables.
type records[T Record] struct {
	t    Tables
	kind Kind
	// key returns v's key; check refuses a record no reader could use.
	key   func(v *T) string
	check func(v *T) error
	// gen is v's generation, which Put sets.
	gen func(v *T) *uint64
}

// Homes returns the homes of t, by id.
func Homes(t Tables) Records[Home] {
	return records[Home]{t: t, kind: KindHome,
		key: func(h *Home) string { return h.ID }, check: func(h *Home) error { return h.Validate() },
		gen: func(h *Home) *uint64 { return &h.Generation }}
}

// Apps returns the apps registered at runtime in t, by slug.
func Apps(t Tables) Records[App] {
	return records[App]{t: t, kind: KindApp,
		key: func(a *App) string { return a.Slug }, check: func(a *App) error { return checkSlug(a.Slug) },
		gen: func(a *App) *uint64 { return &a.Generation }}
}

// AppStates returns the operators' desired states of apps in t, by slug.
func AppStates(t Tables) Records[AppState] {
	return records[AppState]{t: t, kind: KindAppState,
		key: func(s *AppState) string { return s.Slug }, check: func(s *AppState) error { return s.Validate() },
		gen: func(s *AppState) *uint64 { return &s.Generation }}
}

// TargetIndex returns the target index of t: the claims, by target.
func TargetIndex(t Tables) Records[Claim] {
	return records[Claim]{t: t, kind: KindClaim,
		key: func(c *Claim) string { return c.Target }, check: func(c *Claim) error { return c.validate() },
		gen: func(c *Claim) *uint64 { return &c.Generation }}
}

// Targets returns the roll target of t: one record, under TargetRecord.
func Targets(t Tables) Records[Target] {
	return records[Target]{t: t, kind: KindTarget,
		key: func(*Target) string { return TargetRecord }, check: func(*Target) error { return nil },
		gen: func(t *Target) *uint64 { return &t.Generation }}
}

// checkSlug refuses an app without a slug.
func checkSlug(slug string) error {
	if slug == "" {
		return errors.New("slug is empty")
	}
	return nil
}

// name names the record under key in errors: "home h1", or "target" (and
// "home" for a record without its key).
func (r records[T]) name(key string) string {
	if r.kind == KindTarget || key == "" {
		return r.kind.Name
	}
	return r.kind.Name + " " + key
}

func (r records[T]) Get(ctx context.Context, key string) (T, error) {
	var v T
	raw, err := r.t.GetRecord(ctx, r.kind, key)
	if err == nil {
		if err = Decode(raw, &v); err != nil {
			err = fmt.Errorf("decode stored %s: %w", r.kind.Name, err)
		}
	}
	if err != nil {
		var zero T
		return zero, fmt.Errorf("registry: get %s: %w", r.name(key), err)
	}
	return v, nil
}

func (r records[T]) List(ctx context.Context) ([]T, error) {
	out := []T{}
	err := r.t.EachRecord(ctx, r.kind, func(key string, raw []byte) error {
		var v T
		if err := Decode(raw, &v); err != nil {
			return fmt.Errorf("decode stored %s %s: %w", r.kind.Name, key, err)
		}
		out = append(out, v)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("registry: list %s: %w", r.kind.Table, err)
	}
	return out, nil
}

func (r records[T]) Put(ctx context.Context, v T, cond Cond) (T, error) {
	var zero T
	key := r.key(&v)
	if err := r.check(&v); err != nil {
		return zero, fmt.Errorf("registry: put %s: %w", r.name(key), err)
	}
	*r.gen(&v) = cond.Generation + 1
	raw, err := json.Marshal(v)
	if err != nil {
		return zero, fmt.Errorf("registry: put %s: encode: %w", r.name(key), err)
	}
	if err := r.t.PutRecord(ctx, r.kind, key, raw, cond); err != nil {
		return zero, fmt.Errorf("registry: put %s: %w", r.name(key), err)
	}
	return v, nil
}

func (r records[T]) Delete(ctx context.Context, key string, cond Cond) error {
	if err := r.t.DeleteRecord(ctx, r.kind, key, cond); err != nil {
		return fmt.Errorf("registry: delete %s: %w", r.name(key), err)
	}
	return nil
}
