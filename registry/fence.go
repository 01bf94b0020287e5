package registry

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// ErrUnavailable means the store's backend does not answer (a shared
// store's server is down, unreachable or too slow; an embedded store is
// closed). Nothing was read or written, or the outcome of a write is
// unknown. Callers that can serve from what they know already do so; a
// caller that needs the store fails fast with fault.Unavailable.
var ErrUnavailable = errors.New("registry: store unavailable")

// ErrNameTaken means another run of a gateway holds this gateway's
// instance name in the fleet's store: it took the name over while this
// run was paused or cut off from the store past its heartbeat's TTL, or
// both started under one name. This run's heartbeats and locks are
// refused from then on.
var ErrNameTaken = errors.New("registry: another gateway run holds this instance name")

// Fence is the lease a guarded write is made under: the lock name and the
// fencing token the holder received from Lock. A write with a fence
// succeeds only while that lease is the live one of its name, checked by
// the store in the same atomic step as the generation and owner. The zero
// Fence guards nothing.
type Fence struct {
	// Lock is the lock's name, as given to Lock.
	Lock string
	// Token is the lease's fencing token.
	Token uint64
}

// FenceOf returns the fence of a held lease.
func FenceOf(l Lease) Fence { return Fence{Lock: l.Name, Token: l.Token} }

// Fenced returns c guarded by l: the write it conditions is refused with
// ErrLeaseLost unless l is still the live lease of its lock.
func (c Cond) Fenced(l Lease) Cond {
	c.Fence = FenceOf(l)
	return c
}

// Check explains why a stored lease (found reports whether the lock has
// one: holder token and expiry) does not admit a write fenced by f at now,
// as ErrLeaseLost; nil when it does, or when f is zero.
func (f Fence) Check(found bool, token uint64, expires, now time.Time) error {
	switch {
	case f.Lock == "":
		return nil
	case !found:
		return fmt.Errorf("fence %s#%d: the lock is not held: %w", f.Lock, f.Token, ErrLeaseLost)
	case token != f.Token:
		return fmt.Errorf("fence %s#%d: the lock's live token is %d: %w", f.Lock, f.Token, token, ErrLeaseLost)
	case !now.Before(expires):
		return fmt.Errorf("fence %s#%d: the lease expired at %s: %w", f.Lock, f.Token, expires.Format(time.RFC3339Nano), ErrLeaseLost)
	}
	return nil
}

// Change keys name what Changed watches. A lock's key is its name (as
// given to Lock: "home/h1"); records have these.
const (
	changeHome = "home:"
	changeApp  = "app:"
	// changeAppState does not begin with changeApp: an app state is not
	// an app record, though its change is announced on AnyAppKey too.
	changeAppState = "appstate:"
	changeClaim    = "claim:"
	changeTarget   = "target"
)

// HomeKey is the change key of home id's record.
func HomeKey(id string) string { return changeHome + id }

// AppKey is the change key of app slug's record.
func AppKey(slug string) string { return changeApp + slug }

// TargetKey is the change key of the roll target.
const TargetKey = changeTarget

// ClaimKey is the change key of the claim on target.
func ClaimKey(target string) string { return changeClaim + target }

// Notifier tells waiters that something changed in a store: on this
// instance and, for a shared store, on every instance that shares it.
//
// Contract: Changed(key) returns a channel that is closed at the first
// change of key made after the call: a lock released (its name is the key),
// a record written or deleted (HomeKey, AppKey, ClaimKey, TargetKey). A
// change may also be announced that did not happen (a shared store that
// lost its connection to the server announces every key when it is back,
// since it may have missed some), so a waiter always checks the state again
// after waking; it never learns what changed from the channel. A lease that
// merely expires is not announced: a waiter on a lock also re-tries on a
// bounded timer.
type Notifier interface {
	Changed(key string) <-chan struct{}
}

// Changes is an in-process Notifier: one channel per key with waiters,
// closed and forgotten on the key's next change.
type Changes struct {
	mu      sync.Mutex
	waiters map[string]chan struct{}
}

// Changed returns the channel closed at key's next change.
func (c *Changes) Changed(key string) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.waiters == nil {
		c.waiters = map[string]chan struct{}{}
	}
	ch, ok := c.waiters[key]
	if !ok {
		ch = make(chan struct{})
		c.waiters[key] = ch
	}
	return ch
}

// AnyHomeKey is announced with every home's own key: a watcher of every
// home (a gateway learning of homes registered elsewhere) waits on it.
const AnyHomeKey = changeHome + "*"

// AnyAppKey is announced with every app's own key, as AnyHomeKey is for
// homes.
const AnyAppKey = changeApp + "*"

// Fire wakes the waiters of key, and of AnyHomeKey or AnyAppKey for a
// home's or an app's key.
func (c *Changes) Fire(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := []string{key}
	switch {
	case strings.HasPrefix(key, changeHome):
		keys = append(keys, AnyHomeKey)
	case strings.HasPrefix(key, changeApp), strings.HasPrefix(key, changeAppState):
		keys = append(keys, AnyAppKey)
	}
	for _, k := range keys {
		if ch, ok := c.waiters[k]; ok {
			close(ch)
			delete(c.waiters, k)
		}
	}
}

// FireAll wakes every waiter (a store that may have missed changes).
func (c *Changes) FireAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, ch := range c.waiters {
		close(ch)
		delete(c.waiters, key)
	}
}
