package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/wakegate/wakegate/ownership"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/registry"
)

// The fleet's side of the ownership of machine-local homes (wake/owner.go):
// which gateways are alive (their heartbeat, the session report, has not
// run out) and how one gateway asks the runner of a home to stop its
// process (a question on the store's change channel, answered by the
// runner's engine).

// peersLiveFor is how long one reading of the fleet's live gateways is
// used before it is read again.
const peersLiveFor = 500 * time.Millisecond

// peerStopSlack is added to twice exec.stop_grace (SIGTERM, then SIGKILL)
// to bound the wait for a runner's answer.
const peerStopSlack = 5 * time.Second

// fleetPeers implements ownership.Peers over the fleet's store.
type fleetPeers struct {
	f        registry.Fleet
	instance string
	// stopWait bounds the wait for a runner's answer.
	stopWait time.Duration

	mu   sync.Mutex
	at   time.Time
	live map[string]bool
}

// Alive reports whether instance has a live session report.
func (p *fleetPeers) Alive(ctx context.Context, instance string) (bool, error) {
	if instance == p.instance {
		return true, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.live == nil || time.Since(p.at) > peersLiveFor {
		reps, err := p.f.Reports(ctx)
		if err != nil {
			return false, err
		}
		p.live = make(map[string]bool, len(reps))
		for _, r := range reps {
			p.live[r.Instance] = true
		}
		p.at = time.Now()
	}
	return p.live[instance], nil
}

// peerStop is a question to the runner of a home, and peerStopped its
// answer.
type peerStop struct {
	Op      string `json:"op"`
	Home    string `json:"home"`
	Ref     string `json:"ref,omitempty"`
	Suspend bool   `json:"suspend,omitempty"`
}

type peerStopped struct {
	How    string `json:"how"`
	Proven bool   `json:"proven"`
	Err    string `json:"err,omitempty"`
}

// Stop asks instance to take down its process of the home s names.
func (p *fleetPeers) Stop(ctx context.Context, instance string, s provider.Spec, suspend bool) (string, bool, error) {
	body, err := json.Marshal(peerStop{Op: "stop", Home: s.ID, Ref: s.Ref, Suspend: suspend})
	if err != nil {
		return "", false, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.stopWait)
	defer cancel()
	raw, err := p.f.Ask(ctx, instance, string(body))
	if err != nil {
		return "", false, err
	}
	var a peerStopped
	if err := json.Unmarshal([]byte(raw), &a); err != nil {
		return "", false, fmt.Errorf("answer of %s: %w", instance, err)
	}
	if a.Err != "" {
		return a.How, a.Proven, errors.New(a.Err)
	}
	return a.How, a.Proven, nil
}

// answerPeer answers what another gateway of the fleet asks this one.
func (f *Fleet[H]) answerPeer(ctx context.Context, from, body string) string {
	var q peerStop
	var a peerStopped
	switch err := json.Unmarshal([]byte(body), &q); {
	case err != nil:
		a.Err = "unreadable question: " + err.Error()
	case q.Op == opQuiesce:
		return f.answerQuiesce(from, q.Home) // fleet_stopping.go
	case q.Op != "stop":
		a.Err = "unknown question " + q.Op
	default:
		ctx, cancel := context.WithTimeout(ctx, f.peers.stopWait)
		defer cancel()
		var err error
		a.How, a.Proven, err = f.engine.StopRun(ctx, q.Home, q.Ref, q.Suspend)
		if err != nil {
			a.Err = err.Error()
			f.log.Warn("fleet: stop a home for another gateway", "home", q.Home, "from", from, "err", err)
		}
	}
	raw, _ := json.Marshal(a)
	return string(raw)
}

// MachineName names this machine for the records of the homes it runs:
// its host name and boot id (two containers on one kernel share the boot
// but not, as a rule, the host name or the loopback). "" when neither can
// be read.
func MachineName() string {
	host, _ := os.Hostname()
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if host == "" && len(boot) == 0 {
		return ""
	}
	return host + "/" + strings.TrimSpace(string(boot))
}

// Release clears this gateway as the runner of the homes whose processes
// its shutdown stopped, so that any gateway of the fleet starts them at
// the next request. Nothing on a nil *Fleet, or before Attach.
func (f *Fleet[H]) Release(ids []string) {
	if f == nil || f.engine == nil || len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), fleetSyncTimeout)
	defer cancel()
	f.engine.Release(ctx, ids)
}

var _ ownership.Peers = (*fleetPeers)(nil)
