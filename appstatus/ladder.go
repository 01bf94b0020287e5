package appstatus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/wakegate/wakegate/internal/endpoint"
	"github.com/wakegate/wakegate/probe"
	"github.com/wakegate/wakegate/registry"
)

// The ladder of DESIGN rule 11: an app's phase is the first rung that does
// not pass, checked in this order.
//
//  1. runtime failed                   -> failed/runtime-failed
//     runtime state not known          -> unknown/runtime-unknown
//     (or home state unreadable)
//  2. desired state stopped            -> stopped/stopped
//     runtime waking                   -> starting/home-waking
//     runtime not running              -> starting/home-sleeping
//  3. runtime's own check unknown      -> starting/health-pending (also
//     while the home wakes), failed      -> failed/unhealthy (health.go)
//     direct health check unhealthy    -> starting/health-starting inside
//     the start period, else failed/unhealthy
//  4. endpoint does not accept         -> starting/endpoint-not-ready
//  5. no route yet                     -> starting/route-pending
//  6. self-probe does not pass         -> starting/probe-failed
//     (all pass)                       -> ready/ready
//
// A failed runtime is named before a desired stop, so that an operator
// stopping an app whose home failed still sees why. An observation that
// runs out of time mid-way is unknown/not-observed (and is not stored: the
// last status stands).

// rung is the outcome of one rung: pass is true when the ladder goes on.
type rung struct {
	st   Status
	pass bool
}

// ladder walks the rungs in order and returns the first that does not
// pass, or ready.
func (a *Apps) ladder(ctx context.Context, ap *observedApp) Status {
	s := ap.spec
	ap.mu.Lock()
	stopped := ap.stopped
	ap.mu.Unlock()

	base, since, r := a.runtimeRung(ctx, ap, stopped)
	if !r.pass {
		if r.st.Reason == ReasonHomeWaking {
			// A wake waiting for the runtime's check shows it.
			if h := a.runtimeHealthRung(ctx, s); h.st.Reason == ReasonHealthPending {
				return h.st
			}
		}
		return r.st
	}
	if r := a.runtimeHealthRung(ctx, s); !r.pass {
		return r.st
	}
	if r := a.healthRung(ctx, s, base, since); !r.pass {
		return r.st
	}
	if _, ok := a.o.Routes.RouteState(s.Slug); !ok {
		return appStatus(s, PhaseStarting, ReasonRoutePending, "the gateway has no route for the app yet")
	}
	return a.probeRung(ctx, s)
}

// msgStopped is the message of an app whose desired state is stopped.
const msgStopped = "the app is stopped (its desired state is stopped)"

// appStatus is an observation of s that ends now.
func appStatus(s registry.App, p Phase, reason, format string, args ...any) Status {
	return Status{Slug: s.Slug, Phase: p, Reason: reason, Message: fmt.Sprintf(format, args...), ObservedAt: time.Now()}
}

// runtimeRung checks the app's runtime and its desired state (rungs 1 and
// 2). When they pass it returns the base URL the app answers at and when
// its runtime started (the start period counts from there).
func (a *Apps) runtimeRung(ctx context.Context, ap *observedApp, stopped bool) (base string, since time.Time, r rung) {
	s := ap.spec
	fail := func(p Phase, reason, format string, args ...any) (string, time.Time, rung) {
		return "", time.Time{}, rung{st: appStatus(s, p, reason, format, args...)}
	}
	if s.Home == "" {
		// A URL app's runtime is not ours: it counts as running since the
		// app was registered.
		if stopped {
			return fail(PhaseStopped, ReasonStopped, msgStopped)
		}
		return s.Upstream, ap.since, rung{pass: true}
	}
	hs, err := a.o.Homes.HomeState(ctx, s.Home)
	switch {
	case err != nil:
		return fail(PhaseUnknown, ReasonRuntimeUnknown, "the state of home %s could not be read: %v", s.Home, err)
	case hs.Status == registry.StatusFailed:
		return fail(PhaseFailed, ReasonRuntimeFailed, "home %s failed: %s", s.Home, orNone(hs.Reason))
	case hs.Status == registry.StatusUnknown:
		return fail(PhaseUnknown, ReasonRuntimeUnknown, "the state of home %s is not known (%s); the next wake or roll settles it", s.Home, orNone(hs.Reason))
	case stopped:
		// The home may still run for other users, or its suspend is in
		// progress: the app is stopped either way and never published.
		return fail(PhaseStopped, ReasonStopped, msgStopped)
	case hs.Waking || hs.Status == registry.StatusWaking || hs.Status == registry.StatusRestoring:
		return fail(PhaseStarting, ReasonHomeWaking, "home %s is waking", s.Home)
	case hs.Status != registry.StatusRunning || hs.Endpoint == "":
		return fail(PhaseStarting, ReasonHomeSleeping, "home %s is %s; a request to the app wakes it", s.Home, hs.Status)
	}
	since = ap.since
	if !hs.StartedAt.IsZero() {
		since = hs.StartedAt
	}
	return endpoint.HTTP(hs.Endpoint) + s.Path, since, rung{pass: true}
}

func orNone(reason string) string {
	if reason == "" {
		return "no reason recorded"
	}
	return reason
}

// healthRung runs the direct health check (rungs 3 and 4): a check that
// could not connect says nothing of health, and is the endpoint rung's
// failure.
func (a *Apps) healthRung(ctx context.Context, s registry.App, base string, since time.Time) rung {
	err := a.check(ctx, s, base, healthPath(s))
	if ctx.Err() != nil {
		return rung{st: appStatus(s, PhaseUnknown, ReasonNotObserved, "the observation ran out of time")}
	}
	if err == nil {
		return rung{pass: true}
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		return rung{st: appStatus(s, PhaseStarting, ReasonEndpointNotReady, "the upstream does not accept connections: %v", err)}
	}
	hint := a.rootHint(ctx, s, base, err)
	if grace := s.Health.StartPeriod.Duration(); time.Since(since) < grace {
		st := appStatus(s, PhaseStarting, ReasonHealthStarting, "the health check has not passed yet (inside the %s start period): %v", grace, err)
		st.Hint = hint
		return rung{st: st}
	}
	st := appStatus(s, PhaseFailed, ReasonUnhealthy, "the health check failed: %v", err)
	st.Hint = hint
	return rung{st: st}
}

// healthPath is the path the direct health check asks for, after the
// upstream's (or the home's endpoint and the app's) own path: the path
// the gateway forwards the self-probe's GET /apps/{slug}{health.path}
// to. With strip_prefix that is health.path; without it the app is
// forwarded the whole path, so its health is checked under its prefix,
// where it serves.
func healthPath(s registry.App) string {
	if s.StripPrefix {
		return s.Health.Path
	}
	return "/apps/" + s.Slug + s.Health.Path
}

// rootHint is the likely fix of a direct health check that failed with
// err on an app without strip_prefix: when its check got 404 under its
// prefix but health.path answers at the upstream's root, the app serves
// at its root and wants strip_prefix. It costs one more GET, only then.
func (a *Apps) rootHint(ctx context.Context, s registry.App, base string, err error) string {
	var se probe.StatusError
	if s.StripPrefix || !errors.As(err, &se) || int(se) != http.StatusNotFound || ctx.Err() != nil {
		return ""
	}
	if a.check(ctx, s, base, s.Health.Path) != nil {
		return ""
	}
	return fmt.Sprintf("the app answers GET %s at its root but 404 at %s, the path the gateway forwards "+
		"(without strip_prefix an app is forwarded the full path /apps/%s/...): if it serves at its root, set strip_prefix: true",
		s.Health.Path, healthPath(s), s.Slug)
}

// probeRung sends the self-probe through the gateway's own path (rung 6).
func (a *Apps) probeRung(ctx context.Context, s registry.App) Status {
	pctx, cancel := context.WithTimeout(ctx, s.Health.Timeout.Duration())
	code, err := a.o.Routes.SelfProbe(pctx, s.Slug)
	cancel()
	if err != nil {
		st := appStatus(s, PhaseStarting, ReasonProbeFailed, "the self-probe through the gateway failed: %v", err)
		if code != 0 {
			st.Message = fmt.Sprintf("the self-probe through the gateway got %d %s", code, http.StatusText(code))
		}
		st.ProbeStatus = code
		st.Hint = selfProbeHint(s, code)
		return st
	}
	st := appStatus(s, PhaseReady, ReasonReady, "the app answered through the gateway (%d)", code)
	st.ProbeStatus = code
	return st
}

// check runs the direct health check at base: http GET base+path judged by
// the app's status rules, or a tcp connect. An app inside a home is sent
// the home's relay token, as the proxy would send it.
func (a *Apps) check(ctx context.Context, s registry.App, base, path string) error {
	ctx, cancel := context.WithTimeout(ctx, s.Health.Timeout.Duration())
	defer cancel()
	if s.Health.Type == registry.HealthTCP {
		hp, err := probe.HostPort(base)
		if err != nil {
			return err
		}
		c, err := a.dial(ctx, "tcp", hp)
		if err != nil {
			return fmt.Errorf("tcp check: %w", err)
		}
		_ = c.Close()
		return nil
	}
	target, err := probe.URL(base, path, map[string]string{"http": "http", "https": "https"})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return fmt.Errorf("health check: %w", err)
	}
	req.Host = endpoint.HostHeader(req.URL.Host)
	if s.Home != "" {
		a.o.Homes.SetRelayHeader(s.Home, req.Header)
	}
	req.Header.Set("User-Agent", HealthCheckUserAgent)
	res, err := a.client.Do(req)
	if err != nil {
		return fmt.Errorf("health check: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, probe.DrainLimit))
	_ = res.Body.Close()
	if !probe.StatusPasses(res.StatusCode, s.API()) {
		return fmt.Errorf("health check GET %s: %w", path, probe.StatusError(res.StatusCode))
	}
	return nil
}

// selfProbeHint is the likely fix of a self-probe that got code although
// the app's direct health check, which runs first, passed.
func selfProbeHint(s registry.App, code int) string {
	if code != http.StatusNotFound {
		return ""
	}
	direct, through := healthPath(s), "/apps/"+s.Slug+s.Health.Path
	if s.Home != "" && s.Path != "" {
		direct = s.Path + direct
	}
	return fmt.Sprintf("the app's direct health check (GET %s) passes, but through the gateway GET %s got 404: "+
		"check the app's path, health.path and what the gateway changes on the way (host_header, access)", direct, through)
}

// HealthCheckUserAgent is the User-Agent of direct health checks.
const HealthCheckUserAgent = "wakegate-health-check"

// HomeProbePaths are the GETs an auto probe of home id adds to its own:
// for each app inside the home that is checked over http, in slug order
// and with the app's status rules, its direct health check's path (its
// base path joined to healthPath), and for an app without strip_prefix
// also its health path at the base path itself, as before the prefix.
// An app behind strip_prefix is served at such a path, not under
// /node/{target}; one without it under /apps/{slug}, or, when it was not
// told that prefix, at its root, and a home whose app is so
// misconfigured still comes up, for the app's status to say why.
func (a *Apps) HomeProbePaths(id string) []probe.Path {
	set := a.tab.Load()
	var out []probe.Path
	add := func(base, hp string, api bool) {
		p := path.Join("/", base, hp)
		if strings.HasSuffix(hp, "/") && !strings.HasSuffix(p, "/") {
			p += "/"
		}
		for _, o := range out {
			if o.Path == p && o.API == api {
				return
			}
		}
		out = append(out, probe.Path{Path: p, API: api})
	}
	for _, slug := range set.order {
		ap := set.byslug[slug]
		if ap == nil || ap.spec.Home != id || ap.spec.Health.Type == registry.HealthTCP {
			continue
		}
		add(ap.spec.Path, healthPath(ap.spec), ap.spec.API())
		if !ap.spec.StripPrefix {
			add(ap.spec.Path, ap.spec.Health.Path, ap.spec.API())
		}
	}
	return out
}
