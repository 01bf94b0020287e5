package control

import (
	"context"
	"time"

	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/refresh"
)

// A gateway of a fleet shares the drops of its warm verdicts: a forward
// that failed (the home is unreachable), a suspend, a home that failed,
// a roll that starts, a refresh that found the home in another state than
// its record said. Every other gateway drops its verdict of that home at
// once (registry's DropVerdict), instead of forwarding to it until its
// verdict runs out. The announcements are best effort: a full queue or a
// Redis that does not answer loses one, and the verdicts it concerned run
// out within wake.warm_ttl, or are dropped by the next failed forward.

// fleetDropQueue bounds the drops waiting to be announced.
const fleetDropQueue = 256

// fleetDropTimeout bounds one announcement.
const fleetDropTimeout = time.Second

// DropVerdict drops home id's warm verdict here and queues its
// announcement to the other gateways without waiting. Call it after
// Attach.
func (f *Fleet[H]) DropVerdict(id string) {
	f.engine.Drop(id)
	select {
	case f.drops <- id:
	default:
		f.log.Debug("fleet: the queue of dropped verdicts is full; one is not announced", "home", id)
	}
}

// shareVerdicts announces this gateway's dropped verdicts, and drops the
// verdicts other gateways announce, until ctx ends.
func (f *Fleet[H]) shareVerdicts(ctx context.Context) {
	r := f.store
	r.OnVerdictDropped(f.engine.Drop)
	defer r.OnVerdictDropped(nil)
	var feed <-chan events.Event
	if bus := f.engine.Events(); bus != nil {
		sub := bus.Subscribe(fleetDropQueue)
		defer sub.Close()
		feed = sub.C
	}
	for {
		var id string
		select {
		case <-ctx.Done():
			return
		case id = <-f.drops:
		case ev := <-feed:
			switch ev.Type {
			case events.Suspend, events.HomeFailed, events.RollStart, refresh.Event:
				id = ev.Home
			default:
				continue
			}
		}
		actx, cancel := context.WithTimeout(ctx, fleetDropTimeout)
		if err := r.DropVerdict(actx, id); err != nil && ctx.Err() == nil {
			f.log.Debug("fleet: announce a dropped verdict", "home", id, "err", err)
		}
		cancel()
	}
}
