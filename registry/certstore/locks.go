package certstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wakegate/wakegate/registry"
)

// errClosed refuses a lock on a closed storage.
var errClosed = errors.New("certstore: the storage is closed")

// Lock takes the named lock, waiting while another holder (another
// gateway, or another task of this one) has it: until its release is
// announced, its lease runs out, or ctx ends. A store that does not answer
// is an error at once (certmagic retries the job that wanted the lock).
func (s *Storage) Lock(ctx context.Context, name string) error {
	for {
		changed := s.b.Changed(s.lockName(name))
		ok, err := s.TryLock(ctx, name)
		if err != nil || ok {
			return err
		}
		t := time.NewTimer(s.poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("certstore: lock %s: %w", name, ctx.Err())
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
}

// TryLock takes the named lock if nobody holds it, and reports whether it
// did.
func (s *Storage) TryLock(ctx context.Context, name string) (bool, error) {
	if s.isClosed() {
		return false, fmt.Errorf("certstore: lock %s: %w", name, errClosed)
	}
	l, err := s.b.Lock(ctx, s.lockName(name), s.holder, s.ttl)
	switch {
	case errors.Is(err, registry.ErrLocked):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("certstore: lock %s: %w", name, err)
	}
	h := &heldLock{lease: l, stop: make(chan struct{}), done: make(chan struct{})}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = s.b.Unlock(context.WithoutCancel(ctx), l)
		return false, fmt.Errorf("certstore: lock %s: %w", name, errClosed)
	}
	s.held[name] = h
	s.mu.Unlock()
	go s.keep(name, h)
	return true, nil
}

// keep renews h's lease every third of the TTL until h is released or the
// lease is lost. A renewal that fails for want of an answer is tried again
// at the next tick: the lease outlives two missed renewals.
func (s *Storage) keep(name string, h *heldLock) {
	defer close(h.done)
	every := s.ttl / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), every)
		l, err := s.b.Renew(ctx, h.get(), s.ttl)
		cancel()
		switch {
		case errors.Is(err, registry.ErrLeaseLost):
			s.log.Warn("a certificate lock's lease was lost while held; another gateway may take the same job",
				"lock", name, "err", err, "hint", "check the latency to Redis and its availability")
			return
		case err != nil:
			s.log.Warn("renew a certificate lock", "lock", name, "err", err)
		default:
			h.set(l)
		}
	}
}

// RenewLockLease checks that the named lock is still held, renewing its
// lease now. The duration certmagic asks for (up to a month for a job
// that retries) is not taken: the lease is renewed for as long as this
// gateway lives, and a gateway that dies should free the name within one
// TTL, not a month.
func (s *Storage) RenewLockLease(ctx context.Context, name string, _ time.Duration) error {
	s.mu.Lock()
	h := s.held[name]
	s.mu.Unlock()
	if h == nil {
		return fmt.Errorf("certstore: renew lock %s: not held by this gateway", name)
	}
	l, err := s.b.Renew(ctx, h.get(), s.ttl)
	if err != nil {
		return fmt.Errorf("certstore: renew lock %s: %w", name, err)
	}
	h.set(l)
	return nil
}

// Unlock releases the named lock, which this storage must hold. It fails
// when the lease was lost meanwhile (another holder may have done the
// same job) or the store did not answer (the lease then runs out by
// itself).
func (s *Storage) Unlock(ctx context.Context, name string) error {
	s.mu.Lock()
	h := s.held[name]
	delete(s.held, name)
	s.mu.Unlock()
	if h == nil {
		return fmt.Errorf("certstore: unlock %s: not held by this gateway", name)
	}
	close(h.stop)
	<-h.done
	if err := s.b.Unlock(context.WithoutCancel(ctx), h.get()); err != nil {
		return fmt.Errorf("certstore: unlock %s: %w", name, err)
	}
	return nil
}

func (s *Storage) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// closeTimeout bounds releasing the held locks at Close.
const closeTimeout = 2 * time.Second

// Close stops every renewal and releases the locks still held, so other
// gateways need not wait for their leases to run out. Later locks fail.
// Calling it again is a no-op.
func (s *Storage) Close() error {
	s.mu.Lock()
	held := s.held
	s.held = map[string]*heldLock{}
	s.closed = true
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	var errs []error
	for name, h := range held {
		close(h.stop)
		<-h.done
		if err := s.b.Unlock(ctx, h.get()); err != nil {
			errs = append(errs, fmt.Errorf("certstore: release %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}
