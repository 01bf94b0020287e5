package redis

import (
	"context"
	"fmt"
	"strings"
)

// A warm verdict lives in each gateway's memory (the warm path reads no
// store), but a gateway that finds a home unreachable, or takes it down,
// tells the fleet: every other gateway drops its verdict of that home at
// once, instead of forwarding to it until the verdict runs out. The drop
// travels on the change channel as "verdict:<origin>/<home>"; the origin
// (Options.Instance) ignores its own.

// verdictDropPrefix starts the change channel's payload of a dropped
// verdict.
const verdictDropPrefix = "verdict:"

// DropVerdict tells every other gateway sharing the store to drop its warm
// verdict of home id. It is a notice, not a record: a gateway that is not
// subscribed at that moment does not learn of it (its verdict runs out
// within the warm TTL, and a failed forward drops it anyway).
func (r *Store) DropVerdict(ctx context.Context, id string) error {
	if err := r.c.Publish(ctx, r.keys.channel, verdictDropPrefix+r.o.Instance+"/"+id).Err(); err != nil {
		return fmt.Errorf("registry: announce the dropped verdict of %s: %w", id, r.fail(ctx, err))
	}
	return nil
}

// OnVerdictDropped sets fn to receive the id of every home whose verdict
// another gateway dropped (DropVerdict); nil stops it. fn runs on the
// store's subscription and must return at once.
func (r *Store) OnVerdictDropped(fn func(id string)) {
	if fn == nil {
		r.onDrop.Store(nil)
		return
	}
	r.onDrop.Store(&fn)
}

// verdictDropped handles a change message; it reports whether the message
// was a dropped verdict.
func (r *Store) verdictDropped(payload string) bool {
	rest, ok := strings.CutPrefix(payload, verdictDropPrefix)
	if !ok {
		return false
	}
	i := strings.LastIndexByte(rest, '/')
	if i < 0 || rest[:i] == r.o.Instance {
		return true
	}
	if fn := r.onDrop.Load(); fn != nil {
		(*fn)(rest[i+1:])
	}
	return true
}
