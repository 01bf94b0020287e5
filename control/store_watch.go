package control

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/wakegate/wakegate/registry"
)

// storeWatchPeriod is how often the store watch looks at the store's
// writes, and, while they fail, tries a small write of its own.
const storeWatchPeriod = time.Second

// storeWatchProbeTimeout bounds one probe write.
const storeWatchProbeTimeout = 2 * time.Second

// StoreUnwritable says why the embedded store's disk refuses writes, or
// "" while it takes them (or the store has no disk of its own). /readyz
// answers 503 meanwhile: the edge routes new traffic to other gateways.
func StoreUnwritable(store registry.Store) string {
	wh, ok := store.(registry.WriteHealth)
	if !ok {
		return ""
	}
	if _, err := wh.Unwritable(); err != nil {
		return err.Error()
	}
	return ""
}

// StoreDegraded says why the store cannot serve, for the admin status:
// its disk refuses writes, or the fleet's store does not answer; "" when
// neither.
func StoreDegraded(store registry.Store) string {
	if why := StoreUnwritable(store); why != "" {
		return "store unwritable: " + why
	}
	return StoreUnavailable(store)
}

// StoreUnavailable says why the shared store does not answer, or "" while
// it does (and always for the embedded store). Warm homes keep serving
// meanwhile; wakes answer 503 with Retry-After.
func StoreUnavailable(store registry.Store) string {
	if sh, ok := store.(registry.Health); ok {
		err := sh.Unavailable()
		switch {
		case errors.Is(err, registry.ErrNameTaken):
			return "this gateway no longer holds its instance name: " + err.Error() +
				"; another run took it over while this one was paused or cut off from the store: stop this one"
		case err != nil:
			return "the fleet store does not answer: " + err.Error()
		}
	}
	return ""
}

// NameLost reports whether another gateway run took this one's instance
// name over (registry.ErrNameTaken): this run is out of the fleet for
// good, which /readyz says apart from a store that does not answer.
func NameLost(store registry.Store) bool {
	sh, ok := store.(registry.Health)
	return ok && errors.Is(sh.Unavailable(), registry.ErrNameTaken)
}

// WatchStore follows whether the embedded store's disk takes writes, until
// ctx ends: it logs each change once (never at every failed write). Every
// storeWatchPeriod it looks at the disk without writing (CheckDisk), so a
// read-only or full disk is noticed within that period on an idle gateway,
// whose store writes nothing; and while writes fail it tries a small write,
// so that readiness comes back by itself once the disk takes writes again
// (space freed, remounted read-write), even with no other write to prove
// it.
func WatchStore(ctx context.Context, store registry.Store, log *slog.Logger) {
	if p, ok := store.(registry.Pinger); ok {
		watchReach(ctx, p, log)
		return
	}
	wh, ok := store.(registry.WriteHealth)
	if !ok {
		return
	}
	t := time.NewTicker(storeWatchPeriod)
	defer t.Stop()
	var down time.Time // when the failure now logged was first seen; zero while writes pass
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_ = wh.CheckDisk() // a failure it finds is read below
		since, err := wh.Unwritable()
		if err != nil && down.IsZero() {
			down = since
			log.Error("store unwritable: /readyz answers 503 and wakes and admin writes fail with 503 store_unavailable; warm homes keep serving",
				"err", err.Error(), "since", since.UTC().Format(time.RFC3339),
				"hint", "free space on the store's disk or remount it read-write; the disk is looked at and a small write tried every second, and readiness comes back by itself")
		}
		if err != nil {
			// Try a write of our own, which clears the state when it
			// passes.
			pctx, cancel := context.WithTimeout(ctx, storeWatchProbeTimeout)
			_ = wh.ProbeWrite(pctx)
			cancel()
			_, err = wh.Unwritable()
		}
		if err == nil && !down.IsZero() {
			log.Info("store writable again: /readyz answers 200", "was_down", time.Since(down).Round(time.Millisecond).String())
			down = time.Time{}
		}
	}
}

// storePingBound bounds the store watch's question to a shared store: a
// store that takes longer is unreachable (/readyz answers 503).
const storePingBound = time.Second

// watchReach asks the shared store whether it answers every
// storeWatchPeriod, bounded by storePingBound, until ctx ends, and logs
// each change once. While it does not, /readyz answers 503 "degraded:
// store unreachable" and the admin status names the cause.
func watchReach(ctx context.Context, p registry.Pinger, log *slog.Logger) {
	t := time.NewTicker(storeWatchPeriod)
	defer t.Stop()
	var down time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, storePingBound)
		err := p.Ping(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		switch {
		case err != nil && down.IsZero():
			down = time.Now()
			log.Error("store unreachable: /readyz answers 503; warm homes keep serving, wakes answer 503 with Retry-After",
				"err", err.Error(), "hint", "check that the fleet's Redis runs and answers (a paused or overloaded server, or a link that drops packets)")
		case err == nil && !down.IsZero():
			log.Info("store reachable again: /readyz answers 200", "was_down", time.Since(down).Round(time.Millisecond).String())
			down = time.Time{}
		}
	}
}
