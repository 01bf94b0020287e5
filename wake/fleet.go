package wake

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wakegate/wakegate/homefault"
	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/probe"
	"github.com/wakegate/wakegate/registry"
)

// A fleet shares one store (Redis): the lifecycle lock, the records and the
// session counts are the fleet's. When that store does not answer, the
// engine keeps what it can without it:
//   - a warm verdict answers as always (the warm path reads no store);
//   - a home this instance proved before, whose verdict ran out but was
//     never dropped by a failed forward, is proven again from local state:
//     one probe of the endpoint it last proved, no lock, no provider call,
//     no record; a pass renews the verdict;
//   - anything else (a cold home, a home whose forward failed) needs the
//     fleet's lock, and fails fast: 503 with Retry-After, code
//     state_unavailable. It does not count as a failed wake of the home
//     (no backoff), and the next request tries the store again.

// localProofTimeout bounds the probe that proves a home again from local
// state while the store is down.
const localProofTimeout = 2 * time.Second

// storeDown reports whether err comes from a store that does not answer.
func storeDown(err error) bool { return errors.Is(err, registry.ErrUnavailable) }

// fromLocal proves the home again at the endpoint of its last verdict,
// which ran out but was not dropped, while the store is down (see the top
// of this file). ok is false when there is no such verdict or the probe
// fails.
func (w *wakeRun) fromLocal(ctx context.Context) (homes.Awake, bool) {
	v := w.h.warm.Load()
	if v == nil {
		return homes.Awake{}, false
	}
	pctx, cancel := context.WithTimeout(ctx, localProofTimeout)
	defer cancel()
	if _, err := probe.Run(pctx, w.probeSpec(v.endpoint.String()), nil); err != nil {
		w.e.o.Log.Warn("wake: the store does not answer and the home's last endpoint did not pass its probe",
			"home", w.h.spec.ID, "err", err.Error())
		return homes.Awake{}, false
	}
	w.setPhase("proven locally")
	w.e.o.Log.Info("wake: the store does not answer; the home's last endpoint passed its probe and keeps serving",
		"home", w.h.spec.ID)
	return homes.Awake{Endpoint: v.endpoint}, true
}

// fleetBusy refuses (fault.Busy) to take home id down while other
// instances of the fleet report sessions on it, or while their reports
// cannot be read: a home whose users are unknown is not suspended.
func (e *Engine) fleetBusy(ctx context.Context, id string) error {
	n, err := e.roll.reports.Others(ctx, id)
	if err != nil {
		return homefault.Busy(fmt.Errorf("suspend %s: sessions on other instances unknown: %w", id, err))
	}
	if n > 0 {
		return homefault.Busy(fmt.Errorf("suspend %s: %d session(s) on other instances", id, n))
	}
	return nil
}

// errLockWait marks a wake whose time ran out while another operation
// held the home's lifecycle lock (on this instance or another, or a dead
// holder's lease not yet expired): no failure of the home, so it sets no
// failure backoff, and the next request waits for the lock again.
var errLockWait = errors.New("the home's lifecycle lock stayed held")
