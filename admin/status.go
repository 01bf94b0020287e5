package admin

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/wakegate/wakegate/appstatus"
	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/web"
)

// Status is the answer of GET /admin/status.
type Status struct {
	Instance  string    `json:"instance"`
	Version   string    `json:"version"`
	StartedAt time.Time `json:"started_at"`
	UptimeS   float64   `json:"uptime_s"`
	Draining  bool      `json:"draining"`
	// Degraded says why the store cannot serve ("" when it can): the
	// fleet's shared store does not answer, or the embedded store's disk
	// refuses writes. Warm homes serve, wakes answer 503 until it is back.
	Degraded string   `json:"degraded,omitempty"`
	Healthy  bool     `json:"healthy"`
	Problems []string `json:"problems"`
	// Warnings are what the operator should know that does not make the
	// instance unhealthy (what tenants share), one sentence each with the
	// way out; they leave Healthy as it is.
	Warnings []string `json:"warnings,omitempty"`
	// Containment says how every process of an exec home is found and
	// stopped with it (a cgroup per home, or the gateway as a child
	// subreaper), and why: what this machine offers.
	Containment string      `json:"containment,omitempty"`
	Counts      StatusCount `json:"counts"`
	// BodyBudget is what request bodies being read ahead hold against
	// their budget (proxy.body_budget_client, body_budget_total).
	BodyBudget *BodyBudget `json:"body_budget,omitempty"`
	// Homes and Apps are filled with ?full=true.
	Homes []HomeView `json:"homes,omitempty"`
	Apps  []AppView  `json:"apps,omitempty"`
	// Fleet lists the live gateways sharing this one's store, with
	// ?full=true on a gateway of a fleet (nil otherwise).
	Fleet []FleetInstance `json:"fleet,omitempty"`
}

// FleetInstance is one live gateway of a fleet, as its last heartbeat
// (session report) says.
type FleetInstance struct {
	Instance string `json:"instance"`
	// Version is the wakegate version the instance runs ("" when it has
	// not said yet).
	Version string `json:"version,omitempty"`
	// Run is the process that runs the instance, "pid N on HOST" (""
	// when the instance did not say).
	Run string `json:"run,omitempty"`
	// HeartbeatAgeS is how long ago the instance last reported, seconds.
	HeartbeatAgeS float64 `json:"heartbeat_age_s"`
	// Sessions is the instance's live session count over every home, and
	// Homes the count per home.
	Sessions int            `json:"sessions"`
	Homes    map[string]int `json:"homes"`
}

// Fleet is what a Backend of a gateway in a fleet adds: the fleet's live
// instances. The status route lists them when the backend has it.
type Fleet interface {
	FleetInstances(ctx context.Context) ([]FleetInstance, error)
}

// StatusCount counts what the gateway serves.
type StatusCount struct {
	Homes        int `json:"homes"`
	HomesRunning int `json:"homes_running"`
	Apps         int `json:"apps"`
	Sessions     int `json:"sessions"`
}

// status gathers the instance's status; full adds every home and app.
func (s *Server) status(ctx context.Context, full bool) (Status, error) {
	ab := s.b.About()
	homes, err := s.b.ListHomes(ctx)
	if err != nil && ab.Degraded == "" {
		ab.Degraded = "the store does not answer: " + err.Error()
	}
	if err != nil {
		// The store is down: say so rather than fail the status itself.
		return Status{Instance: ab.Instance, Version: ab.Version, StartedAt: ab.StartedAt.UTC(),
			UptimeS: time.Since(ab.StartedAt).Round(time.Millisecond).Seconds(), Draining: ab.Draining,
			Degraded: ab.Degraded, Problems: []string{ab.Degraded}}, nil
	}
	apps := s.b.ListApps()
	st := Status{Instance: ab.Instance, Version: ab.Version, StartedAt: ab.StartedAt.UTC(),
		UptimeS: time.Since(ab.StartedAt).Round(time.Millisecond).Seconds(), Draining: ab.Draining,
		Problems: problems(homes, apps, ab.Draining), Warnings: ab.Warnings, Containment: ab.Containment, BodyBudget: ab.BodyBudget, Counts: StatusCount{Homes: len(homes), Apps: len(apps)}}
	for _, h := range homes {
		st.Counts.Sessions += h.Sessions
		if registry.Status(h.Status) == registry.StatusRunning {
			st.Counts.HomesRunning++
		}
	}
	if ab.Degraded != "" {
		st.Degraded = ab.Degraded
		st.Problems = append(st.Problems, ab.Degraded)
	}
	st.Healthy = len(st.Problems) == 0
	if full {
		st.Homes, st.Apps = homes, apps
		if f, ok := s.b.(Fleet); ok {
			if st.Fleet, err = f.FleetInstances(ctx); err != nil {
				st.Problems = append(st.Problems, "the fleet's instances cannot be listed: "+err.Error())
				st.Healthy = false
			}
		}
	}
	return st, nil
}

// problems lists what makes the instance unhealthy, one sentence each.
func problems(homes []HomeView, apps []AppView, draining bool) []string {
	out := []string{}
	for _, h := range homes {
		switch registry.Status(h.Status) {
		case registry.StatusFailed, registry.StatusUnknown:
			out = append(out, fmt.Sprintf("home %s is %s: %s", h.ID, h.Status, h.Reason))
		default:
			// A home whose last wake failed sleeps, but the next request
			// fails the same way until someone acts.
			if w := h.LastWake; w != nil && w.Outcome == "failed" && h.Wake == nil {
				out = append(out, fmt.Sprintf("home %s: its last wake failed: %s", h.ID, w.Error))
			}
		}
		if h.Verdict == string(registry.VerdictDegraded) {
			out = append(out, fmt.Sprintf("home %s is degraded", h.ID))
		}
	}
	for _, ap := range apps {
		switch {
		case ap.Phase == string(appstatus.PhaseFailed):
			out = append(out, fmt.Sprintf("app %s is failed: %s", ap.Slug, ap.Message))
		case ap.Hint != "":
			// Held back by a mistake an operator can correct (the hint).
			out = append(out, fmt.Sprintf("app %s is %s (%s): %s", ap.Slug, ap.Phase, ap.Reason, ap.Message))
		}
	}
	if draining {
		out = append(out, "the gateway is draining")
	}
	return out
}

func (s *Server) serveStatus(w http.ResponseWriter, r *http.Request) {
	full := r.URL.Query().Get("full")
	st, err := s.status(r.Context(), full == "true" || full == "1")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// serveDashboard serves the dashboard's page (no token: it asks for one).
func (s *Server) serveDashboard(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", web.DashboardCSP)
	_, _ = w.Write(web.Dashboard())
}

// serveAsset serves the dashboard's script and style sheet.
func (s *Server) serveAsset(w http.ResponseWriter, r *http.Request) {
	body, ctype, ok := web.DashboardAsset(chi.URLParam(r, "file"))
	if !ok {
		s.fail(w, r, fault.New(fault.NotFound, "not_found", "no such asset"))
		return
	}
	w.Header().Set("Content-Type", ctype)
	_, _ = w.Write(body)
}
