package admin

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/wakegate/wakegate/appstatus"
	"github.com/wakegate/wakegate/fault"
)

// AppView is an app as the admin API shows it: its config and its last
// observed status.
type AppView struct {
	Slug     string `json:"slug"`
	Kind     string `json:"kind"`
	Home     string `json:"home,omitempty"`
	Upstream string `json:"upstream,omitempty"`
	// URL is where people open the app (public_url and the app's path, or
	// its host). Its host is empty ("http://:8080/apps/x/") when the
	// public listener has none: use the host the admin listener was
	// reached at.
	URL string `json:"url,omitempty"`
	// Phase, Reason and Message are the app's last observed phase, its
	// reason code and a sentence for people.
	Phase   string `json:"phase"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// Route is the app's route state here: candidate or published.
	Route       string     `json:"route"`
	ObservedAt  *time.Time `json:"observed_at,omitempty"`
	ProbeStatus int        `json:"probe_status,omitempty"`
	// Operation is the phase of an operation in progress on the app
	// (start.wake, start.waitReady, stop.suspend, stop.waitStopped, and
	// the same prefixed with restart.).
	Operation string `json:"operation,omitempty"`
	Stale     bool   `json:"stale,omitempty"`
	// Hint is the likely fix when the app is held back by a mistake an
	// operator can correct, such as a missing strip_prefix.
	Hint string `json:"hint,omitempty"`
	// Source is "config" for an app of the config file and "api" for one
	// registered through PUT /admin/apps/{slug}; Generation is the latter's
	// stored generation (its ETag), 0 for the former.
	Source     string `json:"source"`
	Generation uint64 `json:"generation,omitempty"`
	// Phases are the app's last phase changes here, newest first (only in
	// the answer of GET /admin/apps/{slug}).
	Phases []appstatus.PhaseChange `json:"phases,omitempty"`
	// Checks is the app's health-check schedule here (only in the answer
	// of GET /admin/apps/{slug}).
	Checks *AppChecks `json:"checks,omitempty"`
}

// AppChecks is when an app is checked next, and why: the pause doubles
// with each passing check up to health.max_interval, goes back to
// health.interval on a failure or a change of its home, and a request the
// app answered counts as a check.
type AppChecks struct {
	// IntervalMS is the pause after the last check, in milliseconds.
	IntervalMS int64 `json:"interval_ms"`
	// Streak counts the passing checks in a row.
	Streak int `json:"streak"`
	// Sent counts the checks sent since the app was registered here.
	Sent uint64 `json:"sent"`
	// LastCheck is when the last check ended; LastRequest when a request
	// last got an answer from the app; NextCheck when the next check is
	// due. Each is absent when it never happened or is not known yet.
	LastCheck   *time.Time `json:"last_check,omitempty"`
	LastRequest *time.Time `json:"last_request,omitempty"`
	NextCheck   *time.Time `json:"next_check,omitempty"`
}

// ChecksOf is the view of an app's observation schedule s.
func ChecksOf(s appstatus.ObserveSchedule) *AppChecks {
	at := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		u := t.UTC()
		return &u
	}
	return &AppChecks{IntervalMS: s.Interval.Milliseconds(), Streak: s.Streak, Sent: s.Observations,
		LastCheck: at(s.LastObserved), LastRequest: at(s.LastPassive), NextCheck: at(s.Due)}
}

// RouteView is one entry of the route table.
type RouteView struct {
	Slug  string               `json:"slug"`
	State appstatus.RouteState `json:"state"`
}

// MaxAppWait bounds the ?wait= of an app operation.
const MaxAppWait = 10 * time.Minute

func (s *Server) appRoutes(r chi.Router) {
	r.Get("/admin/apps", s.listApps)
	r.Get("/admin/apps/{slug}", s.getApp)
	r.Put("/admin/apps/{slug}", s.putApp)
	r.Delete("/admin/apps/{slug}", s.deleteRecord("slug", s.b.DeleteApp))
	r.Post("/admin/apps/{slug}/refresh", s.refreshApp)
	r.Post("/admin/apps/{slug}/start", s.appOperation(s.b.StartApp))
	r.Post("/admin/apps/{slug}/stop", s.appOperation(s.b.StopApp))
	r.Post("/admin/apps/{slug}/restart", s.appOperation(s.b.RestartApp))
	r.Get("/admin/routes", s.listRoutes)
}

// writeApp answers an app, with its generation as ETag when it has one.
func writeApp(w http.ResponseWriter, status int, v AppView) {
	if v.Generation != 0 {
		w.Header().Set("ETag", etag(v.Generation))
	}
	writeJSON(w, status, v)
}

// writeAppResult answers the app after an observation or an operation: 504
// with the app's last status when the wait ran out, the error when there
// is no app to show.
func (s *Server) writeAppResult(w http.ResponseWriter, r *http.Request, v AppView, err error) {
	switch {
	case err == nil:
		writeApp(w, http.StatusOK, v)
	case v.Slug != "" && fault.Is(err, fault.Timeout):
		writeApp(w, http.StatusGatewayTimeout, v)
	default:
		s.fail(w, r, err)
	}
}

// listApps answers every app, or with ?phase= those in that phase
// (starting, ready, stopped, failed, unknown).
func (s *Server) listApps(w http.ResponseWriter, r *http.Request) {
	apps := s.b.ListApps()
	if ph := r.URL.Query().Get("phase"); ph != "" {
		if !slices.Contains(appPhases, appstatus.Phase(ph)) {
			s.fail(w, r, fault.New(fault.Invalid, "invalid",
				fmt.Sprintf("phase: want one of starting, ready, stopped, failed, unknown; got %q", ph)).WithField("phase"))
			return
		}
		apps = slices.DeleteFunc(apps, func(a AppView) bool { return a.Phase != ph })
	}
	writeJSON(w, http.StatusOK, map[string]any{"apps": apps})
}

// appPhases are the values of ?phase=.
var appPhases = []appstatus.Phase{appstatus.PhaseStarting, appstatus.PhaseReady, appstatus.PhaseStopped, appstatus.PhaseFailed, appstatus.PhaseUnknown}

func (s *Server) getApp(w http.ResponseWriter, r *http.Request) {
	v, err := s.b.GetApp(chi.URLParam(r, "slug"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeApp(w, http.StatusOK, v)
}

// putApp registers or replaces an app. If-Match, when given, must be the
// app's generation (its ETag). 201 for a new app, 200 for a replaced one;
// either way the app is a candidate until its self-probe passes.
func (s *Server) putApp(w http.ResponseWriter, r *http.Request) {
	gen, err := ifMatch(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	body, err := readBody(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	v, created, err := s.b.PutApp(r.Context(), chi.URLParam(r, "slug"), body, gen)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeApp(w, putStatus(created), v)
}

// refreshApp observes an app now (sharing an observation in flight) and,
// with ?wait=PHASE, waits for that phase up to the engine's budget: 504
// with the last status when it runs out. A failed app is answered with 200
// and its failed phase.
func (s *Server) refreshApp(w http.ResponseWriter, r *http.Request) {
	wait := appstatus.Phase(r.URL.Query().Get("wait"))
	switch wait {
	case "", appstatus.PhaseReady, appstatus.PhaseStopped, appstatus.PhaseStarting, appstatus.PhaseFailed:
	default:
		s.fail(w, r, fault.New(fault.Invalid, "invalid",
			"wait: want ready, stopped, starting or failed, got "+strconv.Quote(string(wait))).WithField("wait"))
		return
	}
	v, err := s.b.RefreshApp(r.Context(), chi.URLParam(r, "slug"), wait)
	s.writeAppResult(w, r, v, err)
}

// appOperation answers POST /admin/apps/{slug}/start|stop|restart: the
// operation runs and the answer comes once the app reached the phase the
// operation aims at (ready, or stopped), waiting up to ?wait=DURATION
// (default: the engine's). 200 with the app then, 504 with its last status
// when the wait ran out, 200 with its failed phase when it failed.
func (s *Server) appOperation(op func(context.Context, string, time.Duration) (AppView, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var budget time.Duration
		if q := r.URL.Query().Get("wait"); q != "" {
			d, err := time.ParseDuration(q)
			if err != nil || d <= 0 || d > MaxAppWait {
				s.fail(w, r, fault.New(fault.Invalid, "invalid",
					"wait: want a duration up to "+MaxAppWait.String()+", such as 30s, got "+strconv.Quote(q)).WithField("wait"))
				return
			}
			budget = d
		}
		v, err := op(r.Context(), chi.URLParam(r, "slug"), budget)
		s.writeAppResult(w, r, v, err)
	}
}

func (s *Server) listRoutes(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"routes": s.b.ListRoutes()})
}
