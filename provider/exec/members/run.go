package members

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/group"
)

// Reasons of a group's failed wake (provider.Error).
const (
	// ReasonExited is a member that exited before it was ready.
	ReasonExited = "member_exited"
	// ReasonNotReady is a member whose probe did not pass in time.
	ReasonNotReady = "member_not_ready"
)

// probeEvery is how often a member's probe is tried while it starts:
// nothing tells when a port begins to listen.
const probeEvery = 25 * time.Millisecond

// probeTimeout bounds one try of a member's probe.
const probeTimeout = time.Second

// Proc is a member's process as the Runner started or found it.
type Proc struct {
	PID  int
	Port int
	// Exited is closed once the process is gone; Status then says how it
	// ended.
	Exited <-chan struct{}
	Status func() string
	// Result is the process's result, as a home's Wake returns it.
	Result provider.Result
}

// Runner is what the exec provider does for one member of group home
// group, whose spec is s (ID(group, name), or group for the entry).
// Every method may be called for a member the provider has never seen.
type Runner interface {
	// Wake is the member's process running: the one it has (resumed;
	// wasRunning when it was not suspended), or a new one from s.
	Wake(ctx context.Context, group string, s provider.Spec) (p Proc, wasRunning bool, err error)
	// Stop stops the member as a home's Stop does.
	Stop(ctx context.Context, group string, s provider.Spec) (proven bool, err error)
	// Suspend pauses the member as a home's Suspend does.
	Suspend(ctx context.Context, group string, s provider.Spec) error
	// Status is the member's status as a home's Status is.
	Status(ctx context.Context, group string, s provider.Spec) (provider.Result, error)
	// Made is what the member's live process was started from (Made);
	// live is false when none runs.
	Made(ctx context.Context, group string, s provider.Spec) (made string, live bool, err error)
	// Log is where the member's log is, and its last lines.
	Log(group string, s provider.Spec) (path, tail string)
}

// Group runs groups of processes through a Runner.
type Group struct {
	Runner Runner
	Log    *slog.Logger
	// Grace is the provider's stop grace: a stop of a failed start's
	// members gets twice it per member, and once more.
	Grace time.Duration
	// Client makes the members' HTTP probes.
	Client *http.Client
}

// Spec is what member m of group home s starts from: its command, env,
// working directory and the addresses of the members it depends on
// (addrs, by name). The entry has the home's id, ref, env and relay
// token; the others none of them.
func Spec(s provider.Spec, m Member, addrs map[string]string) provider.Spec {
	ms := provider.Spec{ID: ID(s.ID, m.Name), Target: s.Target, Version: s.Version,
		Command: m.Command, Dir: m.WorkingDir, Options: s.Options}
	if m.Entry {
		ms.ID, ms.Ref, ms.RelayToken = s.ID, s.Ref, s.RelayToken
		ms.Env = slices.Clone(s.Env)
		if ms.Dir == "" {
			ms.Dir = s.Dir
		}
	}
	ms.Env = append(ms.Env, m.Env...)
	for _, d := range m.DependsOn {
		ms.Env = append(ms.Env, AddrVar(d)+"="+addrs[d])
	}
	return ms
}

// memberError names member m in a failure of its own: in the cause, and
// in the operator's hint, with where its log is.
func (g Group) memberError(op string, s provider.Spec, m Member, err error) error {
	if pe, ok := provider.AsError(err); ok {
		pe.Err = fmt.Errorf("member %s: %w", m.Name, pe.Err)
		pe.Hint = "member " + m.Name + ": " + pe.Hint
		return pe
	}
	log, _ := g.Runner.Log(s.ID, Spec(s, m, nil))
	return &provider.Error{Op: op, Err: fmt.Errorf("member %s: %w", m.Name, err),
		Hint: "member " + m.Name + " did not start: read its log (" + log + ")"}
}

// Wake starts s's members in start order (ms), each once the members it
// depends on pass their probe, and returns the entry's result; the
// gateway then probes the entry as any home. A group that runs only in
// part is stopped first, so it starts whole.
func (g Group) Wake(ctx context.Context, s provider.Spec, ms []Member) (provider.Result, error) {
	return g.start(ctx, "wake", s, ms, nil)
}

// start starts s's members in start order; a member for which renew says
// so is stopped first and started again. A member that fails makes the
// whole group stop.
func (g Group) start(ctx context.Context, op string, s provider.Spec, ms []Member,
	renew func(spec provider.Spec, m Member) bool) (provider.Result, error) {
	if err := g.wholeOrNone(ctx, s, ms); err != nil {
		return provider.Result{}, err
	}
	needed := group.DependedOn(ms, Member.node)
	addrs := map[string]string{}
	var res provider.Result
	all := true
	for _, m := range ms {
		spec := Spec(s, m, addrs)
		if renew != nil && renew(spec, m) {
			proven, err := g.Runner.Stop(ctx, s.ID, spec)
			if err == nil && !proven {
				err = errors.New("not proven stopped")
			}
			if err != nil {
				return provider.Result{}, g.fail(ctx, s, ms, g.memberError(op, s, m, err))
			}
		}
		p, was, err := g.Runner.Wake(ctx, s.ID, spec)
		if err == nil && (!m.Entry || needed[m.Name]) {
			err = g.await(ctx, op, s, spec, p, m)
		}
		if err != nil {
			return provider.Result{}, g.fail(ctx, s, ms, g.memberError(op, s, m, err))
		}
		all = all && was
		addrs[m.Name] = "127.0.0.1:" + strconv.Itoa(p.Port)
		if m.Entry {
			res = p.Result
		}
	}
	res.WasRunning = all
	return res, nil
}

// wholeOrNone stops s's group when some of its members run and others do
// not (one exited between wakes): its members then start again together,
// each with the addresses of the others as they are now.
func (g Group) wholeOrNone(ctx context.Context, s provider.Spec, ms []Member) error {
	var up, down []string
	for _, m := range ms {
		_, live, err := g.Runner.Made(ctx, s.ID, Spec(s, m, nil))
		if err != nil {
			return err
		}
		if live {
			up = append(up, m.Name)
		} else {
			down = append(down, m.Name)
		}
	}
	if len(up) == 0 || len(down) == 0 {
		return nil
	}
	g.Log.Warn("exec: a group runs in part; stopping it to start it whole", "home", s.ID,
		"running", strings.Join(up, ","), "not running", strings.Join(down, ","))
	proven, err := g.Stop(ctx, s, ms)
	if err == nil && !proven {
		err = errors.New("the members left running are not proven stopped")
	}
	return err
}

// fail stops what a failed start of s's group started, on a context of
// its own (the wake's may have run out), and returns err.
func (g Group) fail(ctx context.Context, s provider.Spec, ms []Member, err error) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Duration(2*len(ms)+1)*g.Grace)
	defer cancel()
	if _, serr := g.Stop(sctx, s, ms); serr != nil {
		g.Log.Warn("exec: stopping a group whose start failed", "home", s.ID, "err", serr)
	}
	return err
}

// await waits until member m's process p passes m's probe (at once
// without a probe), up to ctx's end. One that exits meanwhile fails with
// how it ended and its log's last lines.
func (g Group) await(ctx context.Context, op string, s, spec provider.Spec, p Proc, m Member) error {
	exited := func() error {
		log, tail := g.Runner.Log(s.ID, spec)
		return &provider.Error{Op: op, Reason: ReasonExited,
			Err:  fmt.Errorf("pid %d %s; last log lines: %s", p.PID, p.Status(), tail),
			Hint: "it exits at once: read its log (" + log + ") and fix its command"}
	}
	addr := "127.0.0.1:" + strconv.Itoa(p.Port)
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for {
		select {
		case <-p.Exited:
			return exited()
		default:
		}
		if m.Probe == "" {
			return nil
		}
		last := g.probe(ctx, addr, m.Probe)
		if last == nil {
			g.Log.Info("exec: member ready", "home", s.ID, "member", m.Name, "pid", p.PID, "probe", m.Probe)
			return nil
		}
		select {
		case <-p.Exited:
			return exited()
		case <-ctx.Done():
			log, _ := g.Runner.Log(s.ID, spec)
			return &provider.Error{Op: op, Reason: ReasonNotReady,
				Err:  fmt.Errorf("probe %s of %s did not pass before the wake timeout: %w", m.Probe, addr, last),
				Hint: "it runs but its probe fails: read its log (" + log + "), check that it listens on {port} and that its probe is right"}
		case <-t.C:
		}
	}
}

// probe tries a member's probe ("tcp" or an HTTP path) once on addr.
func (g Group) probe(ctx context.Context, addr, probe string) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if probe == ProbeTCP {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		return c.Close()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+probe, nil)
	if err != nil {
		return err
	}
	resp, err := g.Client.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode >= 400 {
		return fmt.Errorf("GET %s answered %s", probe, resp.Status)
	}
	return nil
}

// Stop stops s's members in reverse start order; the stop is proven when
// every member's is.
func (g Group) Stop(ctx context.Context, s provider.Spec, ms []Member) (bool, error) {
	proven := true
	for _, m := range slices.Backward(ms) {
		ok, err := g.Runner.Stop(ctx, s.ID, Spec(s, m, nil))
		if err != nil {
			return false, g.memberError("stop", s, m, err)
		}
		proven = proven && ok
	}
	return proven, nil
}

// Suspend pauses s's members in reverse start order.
func (g Group) Suspend(ctx context.Context, s provider.Spec, ms []Member) error {
	for _, m := range slices.Backward(ms) {
		if err := g.Runner.Suspend(ctx, s.ID, Spec(s, m, nil)); err != nil {
			return g.memberError("suspend", s, m, err)
		}
	}
	return nil
}

// Recreate makes s's entry again, and of the other members those whose
// command, env or working directory changed (madeOf: what a spec starts
// from; a new address of a member they depend on is a changed env); the
// others keep running.
func (g Group) Recreate(ctx context.Context, s provider.Spec, ms []Member, madeOf func(provider.Spec) string) (provider.Result, error) {
	return g.start(ctx, "recreate", s, ms, func(spec provider.Spec, m Member) bool {
		if m.Entry {
			return true
		}
		made, live, err := g.Runner.Made(ctx, s.ID, spec)
		changed := err == nil && live && made != madeOf(spec)
		if changed {
			g.Log.Info("exec: member changed; restarting it", "home", s.ID, "member", m.Name)
		}
		return changed
	})
}

// Status is the entry's status, with each member's state in the reason;
// a member that is down while the entry runs makes the group failed.
func (g Group) Status(ctx context.Context, s provider.Spec, ms []Member) (provider.Result, error) {
	var r provider.Result
	var states, down []string
	for _, m := range ms {
		mr, err := g.Runner.Status(ctx, s.ID, Spec(s, m, nil))
		if err != nil {
			return mr, err
		}
		st := string(mr.State)
		if mr.State == provider.StateFailed {
			st += " (" + mr.Reason + ")"
		}
		states = append(states, m.Name+" "+st)
		if m.Entry {
			r = mr
		} else if mr.State != provider.StateRunning && mr.State != provider.StateSuspended {
			down = append(down, m.Name)
		}
	}
	return group.Status(r, states, down), nil
}
