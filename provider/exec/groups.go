package execprov

import (
	"context"
	"strings"

	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/exec/members"
)

// groupRunner is this provider to package members, which runs a group
// home's members: each a home of the provider (the entry the group's own,
// every other ID@MEMBER, run as the group's user), which the supervisor
// never restarts on its own (memberGone).
type groupRunner struct{ e *Provider }

// group is package members' Group over this provider.
func (e *Provider) group() members.Group {
	return members.Group{Runner: groupRunner{e}, Log: e.log, Grace: e.cfg.StopGrace, Client: e.client}
}

// home is the provider's home of the member of group whose spec is s.
func (r groupRunner) home(group string, s provider.Spec) (*home, error) {
	h, err := r.e.homeFor(s.ID)
	if err == nil && s.ID != group {
		r.e.mu.Lock()
		if h.group == "" { // read without the lock by the member's starts
			h.group = group
		}
		r.e.mu.Unlock()
	}
	return h, err
}

// run is what member s of group starts from: never with socket
// activation but for the entry, and with the digest of what it runs.
func (r groupRunner) run(group string, s provider.Spec) runSpec {
	sp := r.e.specFor(s)
	sp.activate = sp.activate && s.ID == group
	sp.made = members.Made(sp.command, sp.env, sp.dir, sp.version)
	return sp
}

func (r groupRunner) Wake(ctx context.Context, group string, s provider.Spec) (members.Proc, bool, error) {
	h, err := r.home(group, s)
	if err != nil {
		return members.Proc{}, false, err
	}
	p, was, err := r.e.wakeOne(ctx, h, s, r.run(group, s))
	if err != nil {
		return members.Proc{}, false, err
	}
	return members.Proc{PID: p.PID, Port: p.port, Exited: p.exited, Status: func() string { return p.status },
		Result: p.result()}, was, nil
}

// Stop, Suspend and Status act on a member's home as on any home's: its
// group matters only to a start.
func (r groupRunner) Stop(ctx context.Context, _ string, s provider.Spec) (bool, error) {
	return r.e.stop(ctx, s)
}

func (r groupRunner) Suspend(ctx context.Context, _ string, s provider.Spec) error {
	return r.e.suspend(ctx, s)
}

func (r groupRunner) Status(ctx context.Context, _ string, s provider.Spec) (provider.Result, error) {
	return r.e.status(ctx, s)
}

func (r groupRunner) Made(ctx context.Context, group string, s provider.Spec) (string, bool, error) {
	h, err := r.home(group, s)
	if err != nil {
		return "", false, err
	}
	p, _, err := r.e.live(ctx, h, s)
	if err != nil || p == nil {
		return "", false, err
	}
	return p.spec.made, true, nil
}

func (r groupRunner) Log(group string, s provider.Spec) (string, string) {
	if h, err := r.home(group, s); err == nil {
		return h.log.Path(), h.log.Tail(reasonLogLines)
	}
	return "", ""
}

// memberGone reports member h of a group, whose process p exited while it
// should run: the group is whole no more. The gateway drops its verdict
// of the group (a report about its running entry), and the next wake
// starts the group again.
func (e *Provider) memberGone(h *home, p *proc, reason string) {
	name := strings.TrimPrefix(h.id, h.group+"@")
	e.note(h, "wakegate: member pid %d %s; its group starts again at its next wake", p.PID, p.status)
	e.mu.Lock()
	var entry *proc
	if g := e.homes[h.group]; g != nil {
		entry = g.proc
	}
	e.mu.Unlock()
	if entry != nil {
		r := entry.result()
		r.State, r.Reason = provider.StateStopped, "member "+name+" exited: "+reason
		e.notify(h.group, r)
	}
	// Once the gateway knows: from here on no request is served by what
	// is left of the group.
	e.log.Error("exec: a member of a group exited; the group starts again at its next wake",
		"home", h.group, "member", name, "reason", reason)
}
