package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/stopping"
)

// The fleet's side of the stopping handshake (package stopping): the
// gateway that stops a home asks every other live gateway, on the store's
// change channel, to quiesce it; each drops its warm verdict of the home
// and answers with its live sessions on it.

// opQuiesce is the question of the handshake.
const opQuiesce = "quiesce"

// quiesced is a gateway's answer to opQuiesce.
type quiesced struct {
	stopping.Quiet
	Err string `json:"err,omitempty"`
}

// homeQuiescer is the engine's part of the answer.
type homeQuiescer interface {
	QuiesceHome(id string) stopping.Quiet
}

// Quiesce asks every other live gateway to quiesce home id and sums their
// sessions on it (stopping.StopBarrier). A gateway that does not answer within
// wait counts only while its heartbeat is still live after the wait: one
// whose heartbeat lapsed no longer trusts its warm verdicts.
func (p *fleetPeers) Quiesce(ctx context.Context, id string, wait time.Duration) (stopping.Quiet, error) {
	var total stopping.Quiet
	reps, err := p.f.Reports(ctx)
	if err != nil {
		return total, fmt.Errorf("live gateways: %w", err)
	}
	body, err := json.Marshal(peerStop{Op: opQuiesce, Home: id})
	if err != nil {
		return total, err
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		silent []string
		errs   []error
	)
	actx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for _, r := range reps {
		if r.Instance == p.instance {
			continue
		}
		wg.Add(1)
		go func(to string) {
			defer wg.Done()
			raw, err := p.f.Ask(actx, to, string(body))
			mu.Lock()
			defer mu.Unlock()
			var a quiesced
			switch {
			case errors.Is(err, registry.ErrNoAnswer):
				silent = append(silent, to)
			case err != nil:
				errs = append(errs, fmt.Errorf("ask %s: %w", to, err))
			default:
				if err := json.Unmarshal([]byte(raw), &a); err != nil {
					errs = append(errs, fmt.Errorf("answer of %s: %w", to, err))
				} else if a.Err != "" {
					errs = append(errs, fmt.Errorf("%s: %s", to, a.Err))
				}
				total.Sessions += a.Sessions
				total.Waiting += a.Waiting
			}
		}(r.Instance)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return total, err
	}
	if len(silent) == 0 {
		return total, nil
	}
	reps, err = p.f.Reports(ctx)
	if err != nil {
		return total, fmt.Errorf("live gateways after %v did not answer: %w", silent, err)
	}
	for _, r := range reps {
		for _, s := range silent {
			if r.Instance == s {
				return total, fmt.Errorf("gateway %s did not answer within %s and its heartbeat is live", s, wait)
			}
		}
	}
	return total, nil
}

// answerQuiesce is this gateway's answer to another's Quiesce.
func (f *Fleet[H]) answerQuiesce(from, id string) string {
	var a quiesced
	if q, ok := f.engine.(homeQuiescer); ok {
		a.Quiet = q.QuiesceHome(id)
	} else {
		a.Err = "this gateway cannot quiesce a home"
	}
	if a.Sessions > 0 {
		f.log.Info("fleet: a home another gateway stops has sessions here; its stop backs off", "home", id, "from", from,
			"sessions", a.Sessions)
	}
	raw, _ := json.Marshal(a)
	return string(raw)
}

var _ stopping.StopBarrier = (*fleetPeers)(nil)
