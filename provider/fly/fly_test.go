package fly_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/fly"
	"github.com/wakegate/wakegate/provider/fly/flyfake"
)

// TestMain removes the binary the exec world built, then checks that no
// goroutine outlived the tests.
func TestMain(m *testing.M) {
	code := testbin.Main(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

const (
	home    = "h1"
	machine = "m1"
	// awaitFor bounds a wait for an observed event; it is never reached
	// when the code works.
	awaitFor = 10 * time.Second
)

// rig is the provider against a fresh fake Machines API.
type rig struct {
	t    *testing.T
	srv  *flyfake.Server
	prov *fly.Provider
}

// newRig starts a fake with machine m1 in state (with image :v1 and a
// config that must survive updates) and a provider with home h1 on it.
func newRig(t *testing.T, state string, fo flyfake.Options, mut func(*fly.Config)) *rig {
	t.Helper()
	srv := flyfake.New(fo)
	t.Cleanup(srv.Close)
	srv.AddMachine(machine, flyfake.MachineSpec{State: state, Image: "registry.fly.io/homes:v1",
		Metadata: map[string]string{"wakegate_version": "v1", "owner": "alice"},
		Config: map[string]any{
			"guest":  map[string]any{"cpus": 1, "memory_mb": 256, "cpu_kind": "shared"},
			"mounts": []any{map[string]any{"volume": "vol_home1", "path": "/data"}},
		}})
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte(srv.Token()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fly.Config{App: srv.App(), Token: "file:" + tok, BaseURL: srv.URL,
		Endpoint: "http://127.0.0.1:{port}", Image: "registry.fly.io/homes:{version}"}
	if mut != nil {
		mut(&cfg)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	p, err := fly.New(cfg, fly.Options{HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	return &rig{t: t, srv: srv, prov: p}
}

func (r *rig) spec(version string) provider.Spec {
	return provider.Spec{ID: home, Target: "alice", Version: version, Options: json.RawMessage(`{"machine": "` + machine + `", "port": 9}`)}
}

func (r *rig) machine() flyfake.Machine {
	r.t.Helper()
	m, ok := r.srv.Machine(machine)
	if !ok {
		r.t.Fatal("machine gone")
	}
	return m
}

// calls is the recorded sequence in short form, each with its status.
func (r *rig) calls() []string {
	var out []string
	for _, c := range r.srv.Calls() {
		out = append(out, c.String())
	}
	return out
}

func deadline(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func query(t *testing.T, c flyfake.Call) url.Values {
	t.Helper()
	q, err := url.ParseQuery(c.Query)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func code(err error) string {
	if e, ok := fly.AsError(err); ok {
		return e.Code
	}
	return ""
}

// TestWakeFollowsDocumentedOrder wakes from each resting state: read the
// machine, start it unless it runs, wait for started on its instance.
func TestWakeFollowsDocumentedOrder(t *testing.T) {
	for _, tc := range []struct {
		from string
		want []string
	}{
		{"stopped", []string{"get", "start", "wait started"}},
		{"suspended", []string{"get", "start", "wait started"}},
		{"created", []string{"get", "start", "wait started"}},
		{"started", []string{"get"}},
		{"starting", []string{"get", "wait started"}},
	} {
		t.Run(tc.from, func(t *testing.T) {
			r := newRig(t, tc.from, flyfake.Options{}, nil)
			if tc.from == "starting" {
				r.srv.SetState(machine, "stopped")
				r.srv.SetState(machine, "starting")
				go func() { // something else started it; it finishes later
					if r.srv.AwaitCall("wait started", 1, awaitFor) {
						r.srv.SetState(machine, "started")
					}
				}()
			}
			res, err := r.prov.Wake(deadline(t, 5*time.Second), r.spec("v1"))
			if err != nil {
				t.Fatalf("wake: %v", err)
			}
			m := r.machine()
			if m.State != "started" {
				t.Fatalf("machine %s after wake, want started", m.State)
			}
			if got := r.calls(); !slices.Equal(got, tc.want) {
				t.Fatalf("calls %v, want %v", got, tc.want)
			}
			for _, c := range r.srv.Calls() {
				if c.Action == "wait" && query(t, c).Get("instance_id") != m.InstanceID {
					t.Errorf("wait for instance %q, machine runs %q", query(t, c).Get("instance_id"), m.InstanceID)
				}
			}
			want := provider.Result{Endpoint: "http://127.0.0.1:9", Ref: machine + ":" + m.InstanceID, State: provider.StateRunning}
			if res != want {
				t.Errorf("result %+v, want %+v", res, want)
			}
			if n := r.srv.OverLimit(); n != 0 {
				t.Errorf("%d calls over the rate limit", n)
			}
		})
	}
}

// TestSuspendAndStopFollowDocumentedOrder: suspend and stop read the
// machine, act only on a running one, and wait for the state reached; a
// stop sends the configured signal and timeout and waits on the instance
// (the API requires it for stopped).
func TestSuspendAndStopFollowDocumentedOrder(t *testing.T) {
	for _, tc := range []struct {
		op, from string
		want     []string
		end      string
	}{
		{"suspend", "started", []string{"get", "suspend", "wait suspended"}, "suspended"},
		{"suspend", "suspended", []string{"get"}, "suspended"},
		{"suspend", "stopped", []string{"get"}, "stopped"},
		{"stop", "started", []string{"get", "stop", "wait stopped"}, "stopped"},
		{"stop", "suspended", []string{"get", "stop", "wait stopped"}, "stopped"},
		{"stop", "stopped", []string{"get"}, "stopped"},
	} {
		t.Run(tc.op+"/"+tc.from, func(t *testing.T) {
			r := newRig(t, tc.from, flyfake.Options{}, func(c *fly.Config) { c.StopSignal, c.StopTimeout = "SIGINT", 7*time.Second })
			ctx := deadline(t, 5*time.Second)
			if tc.op == "suspend" {
				if err := r.prov.Suspend(ctx, r.spec("v1")); err != nil {
					t.Fatalf("suspend: %v", err)
				}
			} else {
				proven, err := r.prov.Stop(ctx, r.spec("v1"))
				if err != nil || !proven {
					t.Fatalf("stop: proven %t, err %v", proven, err)
				}
			}
			if got := r.calls(); !slices.Equal(got, tc.want) {
				t.Fatalf("calls %v, want %v", got, tc.want)
			}
			if m := r.machine(); m.State != tc.end {
				t.Errorf("machine %s, want %s", m.State, tc.end)
			}
			for _, c := range r.srv.Calls() {
				switch c.Action {
				case "stop":
					if c.Body != `{"signal":"SIGINT","timeout":"7s"}` {
						t.Errorf("stop body %s", c.Body)
					}
				case "wait":
					if query(t, c).Get("instance_id") != r.machine().InstanceID {
						t.Errorf("wait %s without the machine's instance", c.Query)
					}
				}
			}
		})
	}
}

// TestRollAndRollbackFollowDocumentedOrder: a recreate takes the lease,
// reads the config, updates with the whole config and the new image under
// the nonce, reads the machine once the update is done and, as Fly leaves
// an updated machine that was suspended stopped, starts it under the
// nonce, waits for the new instance, and releases the lease; a rollback
// is the same onto the prior image. Each update changes the instance id;
// the volume and guest settings survive.
func TestRollAndRollbackFollowDocumentedOrder(t *testing.T) {
	r := newRig(t, "suspended", flyfake.Options{}, nil)
	want := []string{"lease", "get", "update", "get", "start", "wait started", "release"}
	instances := []string{r.machine().InstanceID}
	for _, v := range []string{"v2", "v1"} { // roll, then rollback
		r.srv.SetState(machine, "suspended")
		r.srv.Reset()
		res, err := r.prov.Recreate(deadline(t, 5*time.Second), r.spec(v))
		if err != nil {
			t.Fatalf("recreate on %s: %v", v, err)
		}
		if got := r.calls(); !slices.Equal(got, want) {
			t.Fatalf("%s: calls %v, want %v", v, got, want)
		}
		calls := r.srv.Calls()
		nonce := calls[0].Nonce
		if calls[0].Status != http.StatusCreated || nonce != "" {
			t.Fatalf("lease call %+v", calls[0])
		}
		if calls[2].Nonce == "" || calls[2].Nonce != calls[4].Nonce || calls[2].Nonce != calls[6].Nonce {
			t.Errorf("update nonce %q, start nonce %q, release nonce %q: want the lease's nonce on each",
				calls[2].Nonce, calls[4].Nonce, calls[6].Nonce)
		}
		for _, part := range []string{`"image":"registry.fly.io/homes:` + v + `"`, `"wakegate_version":"` + v + `"`,
			`"owner":"alice"`, `"volume":"vol_home1"`, `"memory_mb":256`} {
			if !strings.Contains(calls[2].Body, part) {
				t.Errorf("%s: update body lacks %s: %s", v, part, calls[2].Body)
			}
		}
		m := r.machine()
		if m.State != "started" || m.Image != "registry.fly.io/homes:"+v || m.LeaseOwner != "" {
			t.Fatalf("%s: machine %+v, want started on the new image with no lease", v, m)
		}
		if slices.Contains(instances, m.InstanceID) {
			t.Fatalf("%s: instance %s not new (seen %v)", v, m.InstanceID, instances)
		}
		instances = append(instances, m.InstanceID)
		if q := query(t, calls[5]); q.Get("instance_id") != m.InstanceID {
			t.Errorf("%s: waited on instance %s, the update made %s", v, q.Get("instance_id"), m.InstanceID)
		}
		if res.Ref != machine+":"+m.InstanceID {
			t.Errorf("%s: ref %s", v, res.Ref)
		}
		got, err := r.prov.Version(deadline(t, 5*time.Second), r.spec(v))
		if err != nil || got != v {
			t.Fatalf("version after roll to %s: %q, %v", v, got, err)
		}
	}
}

// TestWakeRacingSuspend: a wake that finds the machine suspending starts
// it straight away, as Fly allows; on a host that refuses (412), it lets
// the suspend finish, then starts it. Either way the machine ends started.
func TestWakeRacingSuspend(t *testing.T) {
	t.Run("start from suspending", func(t *testing.T) {
		r := newRig(t, "started", flyfake.Options{}, nil)
		r.srv.Wedge(machine, true) // a suspend that would never end
		r.srv.SetState(machine, "suspending")
		r.srv.Reset()
		if _, err := r.prov.Wake(deadline(t, 5*time.Second), r.spec("v1")); err != nil {
			t.Fatalf("wake: %v", err)
		}
		if got, want := r.calls(), []string{"get", "start", "wait started"}; !slices.Equal(got, want) {
			t.Errorf("calls %v, want %v", got, want)
		}
		if m := r.machine(); m.State != "started" {
			t.Fatalf("machine %s, want started", m.State)
		}
	})
	t.Run("refused", func(t *testing.T) {
		r := newRig(t, "started", flyfake.Options{}, nil)
		r.srv.Habits(machine, func(h *flyfake.Habits) { h.NoStartFromSuspending = true })
		r.srv.Wedge(machine, true) // hold the machine in suspending until released below
		ctx := deadline(t, 10*time.Second)
		suspended := make(chan error, 1)
		go func() { suspended <- r.prov.Suspend(ctx, r.spec("v1")) }()
		if !r.srv.AwaitState(machine, "suspending", awaitFor) {
			t.Fatal("machine never suspending")
		}
		// The suspend waits first: on a busy machine its wait could
		// otherwise reach the API after the wake had started the machine,
		// and wait for a suspended state that no longer comes.
		if !r.srv.AwaitCall("wait suspended", 1, awaitFor) {
			t.Fatalf("the suspend did not wait for suspended: %v", r.calls())
		}
		woke := make(chan error, 1)
		go func() {
			_, err := r.prov.Wake(ctx, r.spec("v1"))
			woke <- err
		}()
		// Both the suspend and the wake now wait for suspended.
		if !r.srv.AwaitCall("wait suspended", 2, awaitFor) {
			t.Fatalf("the wake did not wait for the suspend: %v", r.calls())
		}
		r.srv.Wedge(machine, false)
		r.srv.SetState(machine, "suspended")
		if err := <-suspended; err != nil {
			t.Fatalf("suspend: %v", err)
		}
		if err := <-woke; err != nil {
			t.Fatalf("wake: %v", err)
		}
		if m := r.machine(); m.State != "started" {
			t.Fatalf("machine %s, want started", m.State)
		}
		// The two clients' calls interleave up to the wake's second read;
		// from there on the wake alone calls.
		got := r.calls()
		before, after := slices.Clone(got[:len(got)-3]), got[len(got)-3:]
		slices.Sort(before)
		if want := []string{"get", "get", "start", "suspend", "wait suspended", "wait suspended"}; !slices.Equal(before, want) {
			t.Errorf("calls %v: before the start, want %v in any order", got, want)
		}
		if want := []string{"get", "start", "wait started"}; !slices.Equal(after, want) {
			t.Errorf("calls %v: the wake ends with %v", got, want)
		}
	})
}

// TestRollWhileLeaseHeld: another client holds the machine's lease. A
// recreate keeps asking within its deadline (no call over the limit);
// when the lease is released in time it goes ahead, otherwise it fails
// with fly_lease_held naming the holder and never updates the machine.
func TestRollWhileLeaseHeld(t *testing.T) {
	t.Run("released in time", func(t *testing.T) {
		r := newRig(t, "stopped", flyfake.Options{}, nil)
		r.srv.HoldLease(machine, "deployer@example.test", time.Minute)
		go func() {
			if r.srv.AwaitCall("lease", 2, awaitFor) { // two refusals seen
				r.srv.ReleaseLease(machine)
			}
		}()
		if _, err := r.prov.Recreate(deadline(t, 8*time.Second), r.spec("v2")); err != nil {
			t.Fatalf("recreate: %v", err)
		}
		if m := r.machine(); m.Image != "registry.fly.io/homes:v2" || m.State != "started" {
			t.Fatalf("machine %+v", m)
		}
		if n := r.srv.OverLimit(); n != 0 {
			t.Errorf("%d calls over the rate limit", n)
		}
	})
	t.Run("held past the deadline", func(t *testing.T) {
		r := newRig(t, "stopped", flyfake.Options{}, nil)
		r.srv.HoldLease(machine, "deployer@example.test", time.Minute)
		before := r.machine()
		_, err := r.prov.Recreate(deadline(t, 1500*time.Millisecond), r.spec("v2"))
		if code(err) != fly.CodeLeaseHeld {
			t.Fatalf("recreate: %v, want %s", err, fly.CodeLeaseHeld)
		}
		if !strings.Contains(err.Error(), "deployer@example.test") {
			t.Errorf("error does not name the holder: %v", err)
		}
		if e, _ := fly.AsError(err); e.RetryAfter < 30*time.Second || e.RetryAfter > time.Minute {
			t.Errorf("retry-after %s, want the minute left on the lease", e.RetryAfter)
		}
		for _, c := range r.srv.Calls() {
			if c.Action != "lease" || c.Status != http.StatusConflict {
				t.Errorf("call %s %d: only refused lease requests were expected", c.Action, c.Status)
			}
		}
		if len(r.srv.Calls()) < 2 {
			t.Errorf("calls %v: the lease was asked only once", r.calls())
		}
		if m := r.machine(); m.InstanceID != before.InstanceID || m.Image != before.Image {
			t.Errorf("machine changed under another's lease: %+v", m)
		}
		if n := r.srv.OverLimit(); n != 0 {
			t.Errorf("%d calls over the rate limit", n)
		}
	})
}

// TestRateLimits: a 429 storm is ridden out within the deadline, honouring
// Retry-After; and many operations on one machine never exceed the
// documented limit.
func TestRateLimits(t *testing.T) {
	t.Run("storm with Retry-After", func(t *testing.T) {
		r := newRig(t, "stopped", flyfake.Options{}, nil)
		r.srv.Storm(2, time.Second)
		if _, err := r.prov.Wake(deadline(t, 8*time.Second), r.spec("v1")); err != nil {
			t.Fatalf("wake: %v", err)
		}
		calls := r.srv.Calls()
		for i, c := range calls[:len(calls)-1] {
			if c.Status == http.StatusTooManyRequests {
				if gap := calls[i+1].At.Sub(c.At); gap < time.Second {
					t.Errorf("call %d came %s after a 429 asking for 1s", i+1, gap)
				}
			}
		}
		if r.srv.Injected() != 2 || r.srv.OverLimit() != 0 {
			t.Errorf("injected %d (want 2), over the limit %d (want 0)", r.srv.Injected(), r.srv.OverLimit())
		}
	})
	t.Run("storm without Retry-After", func(t *testing.T) {
		r := newRig(t, "suspended", flyfake.Options{}, nil)
		r.srv.Storm(6, 0)
		if _, err := r.prov.Wake(deadline(t, 8*time.Second), r.spec("v1")); err != nil {
			t.Fatalf("wake: %v", err)
		}
		if r.machine().State != "started" || r.srv.Injected() != 6 || r.srv.OverLimit() != 0 {
			t.Errorf("machine %s, injected %d, over the limit %d", r.machine().State, r.srv.Injected(), r.srv.OverLimit())
		}
	})
	t.Run("storm past the deadline", func(t *testing.T) {
		r := newRig(t, "stopped", flyfake.Options{}, nil)
		r.srv.Storm(100, 5*time.Second)
		_, err := r.prov.Wake(deadline(t, 2*time.Second), r.spec("v1"))
		e, ok := fly.AsError(err)
		if !ok || e.Code != fly.CodeRateLimited || e.RetryAfter < 5*time.Second {
			t.Fatalf("wake: %v, want %s with a retry-after of 5s", err, fly.CodeRateLimited)
		}
		if n := len(r.srv.Calls()); n != 1 {
			t.Errorf("%d calls: a Retry-After beyond the deadline should end the wake at once", n)
		}
	})
	t.Run("busy machine", func(t *testing.T) {
		r := newRig(t, "started", flyfake.Options{}, nil)
		ctx := deadline(t, 30*time.Second)
		for i := range 3 {
			if err := r.prov.Suspend(ctx, r.spec("v1")); err != nil {
				t.Fatalf("suspend %d: %v", i, err)
			}
			if _, err := r.prov.Wake(ctx, r.spec("v1")); err != nil {
				t.Fatalf("wake %d: %v", i, err)
			}
		}
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				if _, err := r.prov.Status(ctx, r.spec("v1")); err != nil {
					t.Errorf("status: %v", err)
				}
			})
		}
		wg.Wait()
		if n := r.srv.OverLimit(); n != 0 {
			t.Errorf("%d calls over the documented rate limit", n)
		}
	})
}

// TestStuckInStarting: a machine that never leaves starting fails the
// wake at its deadline; the stop that follows is proven when the machine
// stops, and reported unproven when it hangs in stopping too.
func TestStuckInStarting(t *testing.T) {
	for _, tc := range []struct {
		name   string
		wedged bool
		proven bool
	}{{"stops", false, true}, {"wedged", true, false}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, "stopped", flyfake.Options{}, nil)
			r.srv.Stick(machine, true)
			r.srv.Wedge(machine, tc.wedged)
			_, err := r.prov.Wake(deadline(t, 1200*time.Millisecond), r.spec("v1"))
			if code(err) != fly.CodeWaitTimeout {
				t.Fatalf("wake: %v, want %s", err, fly.CodeWaitTimeout)
			}
			if m := r.machine(); m.State != "starting" {
				t.Fatalf("machine %s, want still starting", m.State)
			}
			proven, err := r.prov.Stop(deadline(t, 1200*time.Millisecond), r.spec("v1"))
			if proven != tc.proven || (err == nil) != tc.proven {
				t.Fatalf("stop: proven %t, err %v; want proven %t", proven, err, tc.proven)
			}
			want := "stopped"
			if tc.wedged {
				want = "stopping"
			}
			if m := r.machine(); m.State != want {
				t.Errorf("machine %s, want %s", m.State, want)
			}
		})
	}
}

// TestStatusNormalisesStates: every documented state maps onto a provider
// state.
func TestStatusNormalisesStates(t *testing.T) {
	r := newRig(t, "stopped", flyfake.Options{}, nil)
	for state, want := range map[string]provider.State{
		"started": provider.StateRunning, "starting": provider.StateRunning, "replacing": provider.StateRunning,
		"suspended": provider.StateSuspended, "suspending": provider.StateSuspended,
		"stopped": provider.StateStopped, "stopping": provider.StateStopped, "created": provider.StateStopped,
		"failed": provider.StateFailed, "destroyed": provider.StateFailed, "something-new": provider.StateUnknown,
		"restarting": provider.StateRunning, "updating": provider.StateRunning, "launch_failed": provider.StateFailed,
		// A version no longer active, read twice: nothing is known.
		"replaced": provider.StateUnknown, "migrated": provider.StateUnknown,
	} {
		r.srv.SetState(machine, state)
		res, err := r.prov.Status(deadline(t, 5*time.Second), r.spec("v1"))
		if err != nil || res.State != want {
			t.Errorf("%s: %+v, %v; want %s", state, res, err, want)
		}
	}
}

// TestVersionSources reads the version from metadata, from the guest by
// exec, and from the home over HTTP.
func TestVersionSources(t *testing.T) {
	home := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("v7\n")) })}
	ln := listen(t)
	go func() { _ = home.Serve(ln) }()
	t.Cleanup(func() { _ = home.Close() })
	for _, tc := range []struct {
		name string
		mut  func(*fly.Config)
		want string
		err  string
	}{
		{"metadata", nil, "v1", ""},
		{"metadata key missing", func(c *fly.Config) { c.VersionKey = "nope" }, "", fly.CodeVersion},
		{"exec", func(c *fly.Config) { c.VersionFrom, c.VersionCommand = fly.VersionExec, "cat /etc/home-version" }, "guest-v3", ""},
		{"exec fails", func(c *fly.Config) { c.VersionFrom, c.VersionCommand = fly.VersionExec, "false" }, "", fly.CodeVersion},
		{"http", func(c *fly.Config) {
			c.VersionFrom, c.Endpoint = fly.VersionHTTP, "http://"+ln.Addr().String()
		}, "v7", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exec := func(_ flyfake.Machine, cmd string) (string, int) {
				if cmd == "cat /etc/home-version" {
					return "guest-v3\n", 0
				}
				return "", 1
			}
			r := newRig(t, "started", flyfake.Options{Exec: exec}, tc.mut)
			got, err := r.prov.Version(deadline(t, 5*time.Second), r.spec("v1"))
			if tc.err != "" {
				if code(err) != tc.err {
					t.Fatalf("version: %q, %v; want %s", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("version: %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestAPIErrorsCarryReasonCodes: refusals become errors with a reason
// code; a machine the API will not suspend is unsupported, so the engine
// stops it instead.
func TestAPIErrorsCarryReasonCodes(t *testing.T) {
	t.Run("unsuspendable", func(t *testing.T) {
		r := newRig(t, "started", flyfake.Options{}, nil)
		r.srv.NoSuspend(machine, true)
		if err := r.prov.Suspend(deadline(t, 5*time.Second), r.spec("v1")); !errors.Is(err, provider.ErrUnsupported) {
			t.Fatalf("suspend: %v, want ErrUnsupported", err)
		}
	})
	t.Run("bad token", func(t *testing.T) {
		r := newRig(t, "stopped", flyfake.Options{Token: "the-real-one"}, nil)
		bad := filepath.Join(t.TempDir(), "bad")
		if err := os.WriteFile(bad, []byte("wrong"), 0o600); err != nil {
			t.Fatal(err)
		}
		p, err := fly.New(fly.Config{App: r.srv.App(), Token: "file:" + bad, BaseURL: r.srv.URL}, fly.Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.Wake(deadline(t, 5*time.Second), r.spec("v1"))
		if code(err) != fly.CodeUnauthorized || strings.Contains(err.Error(), "wrong") {
			t.Fatalf("wake: %v, want %s without the token", err, fly.CodeUnauthorized)
		}
	})
	t.Run("unknown machine", func(t *testing.T) {
		r := newRig(t, "stopped", flyfake.Options{}, nil)
		s := r.spec("v1")
		s.Options = json.RawMessage(`{"machine": "nosuch"}`)
		if _, err := r.prov.Wake(deadline(t, 5*time.Second), s); code(err) != fly.CodeNotFound {
			t.Fatalf("wake: %v, want %s", err, fly.CodeNotFound)
		}
	})
	t.Run("no image", func(t *testing.T) {
		r := newRig(t, "stopped", flyfake.Options{}, func(c *fly.Config) { c.Image = "" })
		if _, err := r.prov.Recreate(deadline(t, 5*time.Second), r.spec("v2")); code(err) != fly.CodeNoImage {
			t.Fatalf("recreate: %v, want %s", err, fly.CodeNoImage)
		}
		if n := len(r.srv.Calls()); n != 0 {
			t.Errorf("%d calls made for a recreate that cannot name its image", n)
		}
	})
}

// TestOnlySafeCallsRetried: a 5xx or a lost answer is retried only where
// sending again is safe. A GET is asked again. A start or an update is
// sent again only after the machine was read and the call's effect not
// found; when the effect is there (the API acted, its answer was lost)
// the call counts as done and is not repeated. A call with no way to
// check its effect (exec) is not sent twice.
func TestOnlySafeCallsRetried(t *testing.T) {
	t.Run("get", func(t *testing.T) {
		r := newRig(t, "started", flyfake.Options{}, nil)
		r.srv.Fail("get", 1, http.StatusServiceUnavailable, false)
		if _, err := r.prov.Status(deadline(t, 5*time.Second), r.spec("v1")); err != nil {
			t.Fatalf("status: %v", err)
		}
		if got, want := r.calls(), []string{"get", "get"}; !slices.Equal(got, want) {
			t.Errorf("calls %v, want %v", got, want)
		}
	})
	t.Run("start not carried out", func(t *testing.T) {
		r := newRig(t, "stopped", flyfake.Options{}, nil)
		r.srv.Fail("start", 1, http.StatusInternalServerError, false)
		if _, err := r.prov.Wake(deadline(t, 5*time.Second), r.spec("v1")); err != nil {
			t.Fatalf("wake: %v", err)
		}
		if got, want := r.calls(), []string{"get", "start", "get", "start", "wait started"}; !slices.Equal(got, want) {
			t.Errorf("calls %v, want %v", got, want)
		}
	})
	t.Run("update answer lost", func(t *testing.T) {
		r := newRig(t, "started", flyfake.Options{}, nil)
		r.srv.Fail("update", 1, http.StatusBadGateway, true)
		if _, err := r.prov.Recreate(deadline(t, 5*time.Second), r.spec("v2")); err != nil {
			t.Fatalf("recreate: %v", err)
		}
		n := 0
		for _, c := range r.calls() {
			if c == "update" {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d updates, want 1: %v", n, r.calls())
		}
		if m := r.machine(); m.Image != "registry.fly.io/homes:v2" || m.State != "started" || m.LeaseOwner != "" {
			t.Errorf("machine %+v", m)
		}
	})
	t.Run("exec", func(t *testing.T) {
		r := newRig(t, "started", flyfake.Options{}, func(c *fly.Config) {
			c.VersionFrom, c.VersionCommand = fly.VersionExec, "cat /etc/home-version"
		})
		r.srv.Fail("exec", 1, http.StatusBadGateway, false)
		if _, err := r.prov.Version(deadline(t, 5*time.Second), r.spec("v1")); code(err) != fly.CodeUnavailable {
			t.Fatalf("version: %v, want %s", err, fly.CodeUnavailable)
		}
		if got, want := r.calls(), []string{"exec"}; !slices.Equal(got, want) {
			t.Errorf("calls %v, want %v", got, want)
		}
	})
}
