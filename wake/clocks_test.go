package wake_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/homefault"
	"github.com/wakegate/wakegate/homes"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/rolls"
	"github.com/wakegate/wakegate/sessions"
	"github.com/wakegate/wakegate/wake"
)

// The engine's clocks (the warm verdict, the failure backoff, the idle
// loop and the eager roll's idle wait) are tested in synctest bubbles:
// virtual time moves only when every goroutine of the bubble waits, so
// each test asserts the exact instant a rule takes effect. The home is
// static at a loopback listener that lives outside the bubble (lcListener),
// proven by a tcp probe: its connect is answered by the kernel in no
// virtual time at all.

// clockProvider is the static provider with its wakes counted. A home
// that fail is set for fails to wake; Recreate restarts a home in place
// on the spec's version, which Version then reports, so that a roll can
// run to its end.
type clockProvider struct {
	*provider.Static
	wakes   atomic.Int64
	fail    atomic.Bool
	version atomic.Value // string: the version the home was recreated on
}

func (p *clockProvider) Wake(ctx context.Context, s provider.Spec) (provider.Result, error) {
	p.wakes.Add(1)
	if p.fail.Load() {
		return provider.Result{}, errors.New("the home does not start")
	}
	return p.Static.Wake(ctx, s)
}

func (p *clockProvider) Recreate(ctx context.Context, s provider.Spec) (provider.Result, error) {
	p.version.Store(s.Version)
	return p.Static.Wake(ctx, s)
}

func (p *clockProvider) Version(context.Context, provider.Spec) (string, error) {
	v, _ := p.version.Load().(string)
	return v, nil
}

// clockEngine is an engine on a fresh store in the calling bubble with o
// applied to lcOptions, and one home h1 of spec (ID, Target and Provider
// filled in) served by a clockProvider at addr.
func clockEngine(t *testing.T, addr string, spec homes.Spec, o func(*wake.Options)) (*wake.Engine, *clockProvider, *sessions.Table) {
	t.Helper()
	p := &clockProvider{Static: &provider.Static{Endpoints: map[string]string{"h1": "http://" + addr}}}
	sess := sessions.New()
	opts := lcOptions(t, lcStore(t), sess, "")
	opts.Providers = map[string]provider.Provider{"static": p}
	if o != nil {
		o(&opts)
	}
	e := wake.New(opts)
	t.Cleanup(e.Close)
	spec.ID, spec.Target, spec.Provider = "h1", "alice", "static"
	if err := e.Register(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	return e, p, sess
}

// runIdleLoop runs e's idle loop with tick until the test ends.
func runIdleLoop(t *testing.T, e *wake.Engine, tick time.Duration) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.Run(ctx, tick)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// TestClockWarmVerdictTrustedForWarmTTL: a verdict is trusted until
// exactly WarmTTL after the wake that proved it, and not a nanosecond
// longer: at ttl-1ns a call is a warm hit with no provider call, at ttl it
// takes the slow path and wakes again.
func TestClockWarmVerdictTrustedForWarmTTL(t *testing.T) {
	addr, _ := lcListener(t)
	synctest.Test(t, func(t *testing.T) {
		const ttl = 10 * time.Second
		e, p, _ := clockEngine(t, addr, homes.Spec{}, func(o *wake.Options) { o.WarmTTL = ttl })
		if _, err := e.EnsureAwake(t.Context(), "h1"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := p.wakes.Load(); n != 1 {
			t.Fatalf("%d provider wakes after a cold call, want 1", n)
		}
		time.Sleep(ttl - time.Nanosecond)
		if _, err := e.EnsureAwake(t.Context(), "h1"); err != nil {
			t.Fatal(err)
		}
		if s := e.Stats(); s.WarmHits != 1 || p.wakes.Load() != 1 {
			t.Fatalf("at ttl-1ns: %d warm hits, %d provider wakes; want 1 hit and no new wake", s.WarmHits, p.wakes.Load())
		}
		time.Sleep(time.Nanosecond)
		if _, err := e.EnsureAwake(t.Context(), "h1"); err != nil {
			t.Fatal(err)
		}
		if s := e.Stats(); s.WarmHits != 1 || s.WarmMisses != 2 || p.wakes.Load() != 2 {
			t.Fatalf("at ttl: %d warm hits, %d misses, %d provider wakes; want the verdict expired and one more wake",
				s.WarmHits, s.WarmMisses, p.wakes.Load())
		}
	})
}

// TestClockFailureBackoffDoublesToItsCap: after a failed wake one more may
// start at once; after that the pause before the next wake is
// FailureBackoff doubled for each failure in a row, at most
// FailureBackoffMax. Every refused call gets wake_backoff with the pause
// left as its Retry-After, and starts no wake.
func TestClockFailureBackoffDoublesToItsCap(t *testing.T) {
	addr, _ := lcListener(t)
	synctest.Test(t, func(t *testing.T) {
		e, p, _ := clockEngine(t, addr, homes.Spec{}, func(o *wake.Options) {
			o.FailureBackoff, o.FailureBackoffMax = time.Second, 3*time.Second
		})
		p.fail.Store(true)
		// wake runs a call that must start a wake, which fails.
		wake := func(step string) {
			t.Helper()
			before := p.wakes.Load()
			_, err := e.EnsureAwake(t.Context(), "h1")
			synctest.Wait()
			if codeOf(err) != homefault.CodeWakeFailed || p.wakes.Load() != before+1 {
				t.Fatalf("%s: %v after %d provider wakes (had %d); want a failed wake", step, err, p.wakes.Load(), before)
			}
		}
		// refused checks that a call is held off for left more.
		refused := func(step string, left time.Duration) {
			t.Helper()
			before := p.wakes.Load()
			_, err := e.EnsureAwake(t.Context(), "h1")
			var after time.Duration
			fe, ok := fault.As(err)
			if ok {
				after = fe.RetryAfter
			}
			if !ok || fe.Code != homefault.CodeWakeBackoff || after != max(left, time.Second) || p.wakes.Load() != before {
				t.Fatalf("%s: %v (Retry-After %v), %d provider wakes (had %d); want wake_backoff, Retry-After %v, no wake",
					step, err, after, p.wakes.Load(), before, max(left, time.Second))
			}
		}
		wake("first wake")
		wake("second wake, allowed at once after one failure")
		// Two failures in a row: 1s doubled once.
		refused("at once after two failures", 2*time.Second)
		time.Sleep(2*time.Second - time.Nanosecond)
		refused("1ns before the 2s pause ends", time.Nanosecond)
		time.Sleep(time.Nanosecond)
		wake("when the 2s pause ends")
		// Three failures: 4s, capped at 3s.
		refused("at once after three failures", 3*time.Second)
		time.Sleep(3*time.Second - time.Nanosecond)
		refused("1ns before the capped pause ends", time.Nanosecond)
		time.Sleep(time.Nanosecond)
		wake("when the capped pause ends")
		// A success ends the backoff: the next failure allows one more
		// wake at once again.
		p.fail.Store(false)
		time.Sleep(3 * time.Second)
		if _, err := e.EnsureAwake(t.Context(), "h1"); err != nil {
			t.Fatalf("wake after the backoff: %v", err)
		}
	})
}

// TestClockIdleLoopSuspendsOnItsTick: the idle loop checks homes on its
// tick, a quarter of the shortest idle timeout (here 10s of a 40s
// timeout, under a configured hour), and suspends a home at the first tick
// that finds it idle for at least its timeout. The session ends at 10s, so
// the home has been idle for exactly its timeout at the tick of 50s, the
// fifth, and is suspended then: not a nanosecond before.
func TestClockIdleLoopSuspendsOnItsTick(t *testing.T) {
	addr, _ := lcListener(t)
	synctest.Test(t, func(t *testing.T) {
		e, _, sess := clockEngine(t, addr, homes.Spec{IdleTimeout: 40 * time.Second}, nil)
		start := time.Now()
		c := sess.Begin("h1")
		if _, err := e.EnsureAwake(t.Context(), "h1"); err != nil {
			t.Fatal(err)
		}
		runIdleLoop(t, e, time.Hour)
		time.Sleep(10 * time.Second)
		sess.End(c)
		status := func() registry.Status {
			t.Helper()
			synctest.Wait()
			hs, err := e.HomeState(context.WithoutCancel(t.Context()), "h1")
			if err != nil {
				t.Fatal(err)
			}
			return hs.Status
		}
		time.Sleep(time.Until(start.Add(50*time.Second - time.Nanosecond)))
		if st, ticks := status(), e.Stats().IdleTicks; st != registry.StatusRunning || ticks != 4 {
			t.Fatalf("1ns before the tick of 50s: status %s after %d ticks; want running after 4 (10s apart)", st, ticks)
		}
		time.Sleep(time.Nanosecond)
		if st, ticks := status(), e.Stats().IdleTicks; st != registry.StatusSuspended || ticks != 5 {
			t.Fatalf("at the tick of 50s: status %s after %d ticks; want suspended at the fifth", st, ticks)
		}
	})
}

// TestClockEagerRollWaitsIdleAfter: with eager rolls, a stale awake home
// rolls at the first idle tick that finds it without a session for
// RollOptions.IdleAfter: with ticks every 10s and IdleAfter 30s from a
// session that ended at 0, the tick of 30s rolls it, the tick of 20s does
// not.
func TestClockEagerRollWaitsIdleAfter(t *testing.T) {
	addr, _ := lcListener(t)
	synctest.Test(t, func(t *testing.T) {
		e, _, sess := clockEngine(t, addr, homes.Spec{Version: "1"}, func(o *wake.Options) {
			o.Roll = rolls.Options{Mode: rolls.Eager, IdleAfter: 30 * time.Second}
		})
		start := time.Now()
		c := sess.Begin("h1")
		if _, err := e.EnsureAwake(t.Context(), "h1"); err != nil {
			t.Fatal(err)
		}
		sess.End(c)
		if _, err := e.SetTarget(t.Context(), registry.Target{Version: "2"}); err != nil {
			t.Fatal(err)
		}
		runIdleLoop(t, e, 10*time.Second)
		time.Sleep(time.Until(start.Add(30*time.Second - time.Nanosecond)))
		synctest.Wait()
		if st := e.RollStats(); st.Started.Load() != 0 || e.Stats().IdleTicks != 2 {
			t.Fatalf("1ns before the tick of 30s: %d rolls started after %d ticks; want none after 2",
				st.Started.Load(), e.Stats().IdleTicks)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if st := e.RollStats(); st.Started.Load() != 1 || st.Rolled.Load() != 1 {
			t.Fatalf("at the tick of 30s: %d rolls started, %d rolled; want the home rolled", st.Started.Load(), st.Rolled.Load())
		}
		hs, err := e.HomeState(t.Context(), "h1")
		if err != nil || hs.Status != registry.StatusRunning {
			t.Fatalf("after the roll: %+v, %v; want running", hs, err)
		}
	})
}
