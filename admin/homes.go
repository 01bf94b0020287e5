package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/wakerecord"
)

// HomeView is a home as the admin API shows it: no secrets.
type HomeView struct {
	ID          string `json:"id"`
	Target      string `json:"target"`
	Provider    string `json:"provider"`
	Version     string `json:"version"`
	Status      string `json:"status"`
	Verdict     string `json:"verdict"`
	Reason      string `json:"reason,omitempty"`
	WantRunning bool   `json:"want_running"`
	// Endpoint is the upstream base URL without user info or query.
	Endpoint string `json:"endpoint,omitempty"`
	// Runner is the gateway of the fleet that runs the home's process
	// (exec homes in a fleet; omitted otherwise, or while none runs).
	Runner   string `json:"runner,omitempty"`
	Sessions int    `json:"sessions"`
	// Warm is true while a fresh warm verdict stands.
	Warm bool `json:"warm"`
	// Wake is the wake in flight, if any.
	Wake              *WakeProgress `json:"wake,omitempty"`
	LastWakeAt        *time.Time    `json:"last_wake_at,omitempty"`
	LastWakeLatencyMS float64       `json:"last_wake_latency_ms,omitempty"`
	LastReadyAt       *time.Time    `json:"last_ready_at,omitempty"`
	IdleTimeout       string        `json:"idle_timeout"`
	// Probe is the home's probe: its kind, or an object when it sets a
	// path, statuses or a settle window.
	Probe registry.HomeProbe `json:"probe,omitzero"`
	// ReadyTimeout is the home's own ready timeout; omitted when it uses
	// wake.ready_timeout.
	ReadyTimeout string `json:"ready_timeout,omitempty"`
	// Command and WorkingDir are the home's own (exec); EnvKeys are the
	// names of its own environment entries (never their values); Options
	// are its provider options.
	Command    []string        `json:"command,omitempty"`
	WorkingDir string          `json:"working_dir,omitempty"`
	EnvKeys    []string        `json:"env_keys,omitempty"`
	Options    json.RawMessage `json:"options,omitempty"`
	RelayToken bool            `json:"relay_token"`
	Generation uint64          `json:"generation"`
	// Dynamic is true for a home registered through the admin API (it is
	// stored and registered again when the gateway restarts, unless the
	// config then declares its id or target).
	Dynamic bool `json:"dynamic,omitempty"`
	// Restarts are the exec supervisor's last restarts of the home's
	// process, oldest first (only in the answers about one home; omitted
	// when there were none since the gateway started).
	Restarts []provider.Restart `json:"restarts,omitempty"`
	// Usage is what the home's processes use now, read from its cgroup
	// (only in the answers about one home; omitted where the provider
	// cannot tell: no cgroup per home).
	Usage *provider.Usage `json:"usage,omitempty"`
	// LastStop is the stop of the home after its last failed wake: whether
	// the provider proved it down (false: a process may be left running)
	// and why the stop failed. Omitted when no failed wake stopped it since
	// the gateway started.
	LastStop *StopView `json:"last_stop,omitempty"`
	// SuspendInS is how many seconds remain before the idle suspend of a
	// running home with no session; omitted otherwise (sessions, not
	// running, or an idle timeout of 0s).
	SuspendInS *float64 `json:"suspend_in_s,omitempty"`
	// LastWake is the last wake that finished on this instance, with its
	// phase timings; omitted when none did since the gateway started.
	LastWake *wakerecord.Record `json:"last_wake,omitempty"`

	// The fields below are only in the answers about one home (detail.go).

	// Wakes are the home's last wakes on this instance, newest first.
	Wakes []wakerecord.Record `json:"wakes,omitempty"`
	// SessionKinds are its live sessions here by kind.
	SessionKinds *SessionKinds `json:"session_kinds,omitempty"`
	// VerdictAgeS is how many seconds ago the home was last proven ready.
	VerdictAgeS *float64 `json:"verdict_age_s,omitempty"`
	// Roll is where the home stands against the roll target.
	Roll *RollView `json:"roll,omitempty"`
}

// StopView is the stop of a half-woken home after a failed wake.
type StopView struct {
	At     time.Time `json:"at"`
	Proven bool      `json:"proven"`
	Error  string    `json:"error,omitempty"`
}

// WakeProgress is a wake in flight.
type WakeProgress struct {
	Phase     string `json:"phase"`
	ElapsedMS int64  `json:"elapsed_ms"`
}

// HomeRequest is the body of PUT /admin/homes/{id}. It takes the settings
// of a home in the config file (homes[]), checked by the same rules.
type HomeRequest struct {
	// Target is the name in /node/{target}. Default: the id.
	Target string `json:"target"`
	// Provider is "exec" (default), "static" (with options.endpoint), or a
	// provider configured under providers in the config file.
	Provider string `json:"provider"`
	// Options are the provider's settings for this home, an object that
	// the provider documents (static: endpoint). Default none.
	Options json.RawMessage `json:"options,omitempty"`
	// Command is the home's own command template (exec), program first,
	// with the placeholders of exec.command. Default: exec.command.
	Command []string `json:"command,omitempty"`
	// Env are extra KEY=VALUE entries for the home's environment.
	Env []string `json:"env,omitempty"`
	// WorkingDir is the home's working directory, an absolute path.
	// Default: the home's own folder.
	WorkingDir string `json:"working_dir,omitempty"`
	// ReadyTimeout bounds the home's wakes, a duration such as "30s".
	// Default: wake.ready_timeout.
	ReadyTimeout *string `json:"ready_timeout,omitempty"`
	// Version is the version a new home first runs. Default "1". A
	// replaced home keeps its stored version (a roll changes versions).
	Version string `json:"version"`
	// RelayToken is a secret reference, env:NAME or file:PATH.
	RelayToken string `json:"relay_token"`
	// IdleTimeout is a duration such as "5m"; default wake.idle_timeout;
	// "0s" never suspends.
	IdleTimeout *string `json:"idle_timeout"`
	// Probe is a kind ("auto", "ws", "http" or "tcp") or an object of
	// kind, path, statuses and settle; default wake.probe's.
	Probe registry.HomeProbe `json:"probe"`
}

// LeaseRequest is the body of POST /admin/homes/{id}/leases.
type LeaseRequest struct {
	// TTL is how long the lease keeps the home in session, e.g. "10m";
	// between MinLease and MaxLease.
	TTL string `json:"ttl"`
}

// The bounds of a lease's TTL.
const (
	MinLease = time.Second
	MaxLease = 24 * time.Hour
)

// LeaseView is the answer of POST /admin/homes/{id}/leases.
type LeaseView struct {
	Home      string    `json:"home"`
	Lease     string    `json:"lease"`
	ExpiresAt time.Time `json:"expires_at"`
}

func (s *Server) homeRoutes(r chi.Router) {
	r.Get("/admin/homes", s.listHomes)
	r.Get("/admin/homes/{id}", s.getHome)
	r.Put("/admin/homes/{id}", s.putHome)
	r.Delete("/admin/homes/{id}", s.deleteRecord("id", s.b.DeleteHome))
	r.Post("/admin/homes/{id}/wake", s.wakeHome)
	r.Post("/admin/homes/{id}/suspend", s.homeAction(s.b.SuspendHome))
	r.Post("/admin/homes/{id}/roll", s.homeAction(s.rollHome))
	r.Post("/admin/homes/{id}/refresh", s.refreshHome)
	r.Post("/admin/homes/{id}/leases", s.postLease)
	r.Delete("/admin/homes/{id}/leases/{lease}", s.deleteLease)
	r.Get("/admin/homes/{id}/logs", s.homeLogs)
}

// writeHome answers a home with its generation as ETag.
func writeHome(w http.ResponseWriter, status int, v HomeView) {
	w.Header().Set("ETag", etag(v.Generation))
	writeJSON(w, status, v)
}

// listHomes answers the homes matching ?status=, ?version= and ?q= (a
// part of the id or target), by id, a page of ?limit= at a time after
// ?cursor= (homes_page.go).
func (s *Server) listHomes(w http.ResponseWriter, r *http.Request) {
	hq, err := parseHomeQuery(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if pg, ok := s.b.(HomePager); ok {
		p, err := pg.PageHomes(r.Context(), hq)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, p)
		return
	}
	hs, err := s.b.ListHomes(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, hq.Page(hs))
}

func (s *Server) getHome(w http.ResponseWriter, r *http.Request) {
	v, err := s.b.GetHome(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeHome(w, http.StatusOK, v)
}

// putHome registers or replaces a home: 201 for a new one, 200 for a
// replaced one. If-Match, when given, must be the stored generation.
func (s *Server) putHome(w http.ResponseWriter, r *http.Request) {
	gen, err := ifMatch(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req HomeRequest
	if err := decodeBody(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	v, created, err := s.b.PutHome(r.Context(), chi.URLParam(r, "id"), req, gen)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeHome(w, putStatus(created), v)
}

// putStatus is the status of a PUT: 201 when it created the record.
func putStatus(created bool) int {
	if created {
		return http.StatusCreated
	}
	return http.StatusOK
}

// deleteRecord answers DELETE of the home or app named by the path
// parameter param: 204 once del removed it. If-Match, when given, must be
// the record's generation.
func (s *Server) deleteRecord(param string, del func(context.Context, string, uint64) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		gen, err := ifMatch(r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if err := del(r.Context(), chi.URLParam(r, param), gen); err != nil {
			s.fail(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

// wakeHome wakes a home: 200 once it is ready (bounded by WaitTimeout), or
// with ?wait=false 202 once the wake has started.
func (s *Server) wakeHome(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("wait") == "false" {
		v, err := s.b.WakeHome(r.Context(), chi.URLParam(r, "id"), false)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeHome(w, http.StatusAccepted, v)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.o.WaitTimeout)
	defer cancel()
	v, err := s.b.WakeHome(ctx, chi.URLParam(r, "id"), true)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeHome(w, http.StatusOK, v)
}

// rollHome is RollHome bounded by WaitTimeout.
func (s *Server) rollHome(ctx context.Context, id string) (HomeView, error) {
	ctx, cancel := context.WithTimeout(ctx, s.o.WaitTimeout)
	defer cancel()
	return s.b.RollHome(ctx, id)
}

// homeAction answers an action on the home named in the path with the
// home as it is afterwards.
func (s *Server) homeAction(act func(context.Context, string) (HomeView, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, err := act(r.Context(), chi.URLParam(r, "id"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeHome(w, http.StatusOK, v)
	}
}

func (s *Server) postLease(w http.ResponseWriter, r *http.Request) {
	var req LeaseRequest
	if err := decodeBody(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	ttl, err := time.ParseDuration(req.TTL)
	if err != nil || ttl < MinLease || ttl > MaxLease {
		s.fail(w, r, fault.New(fault.Invalid, "invalid",
			fmt.Sprintf("ttl: want a duration between %s and %s, got %q", MinLease, MaxLease, req.TTL)).WithField("ttl"))
		return
	}
	id := chi.URLParam(r, "id")
	lease, err := s.b.AddLease(id, ttl)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, LeaseView{Home: id, Lease: strconv.FormatUint(lease, 10), ExpiresAt: time.Now().Add(ttl).UTC()})
}

func (s *Server) deleteLease(w http.ResponseWriter, r *http.Request) {
	lease, err := strconv.ParseUint(chi.URLParam(r, "lease"), 10, 64)
	if err != nil {
		s.fail(w, r, fault.New(fault.Invalid, "invalid", "lease: want a lease id").WithField("lease"))
		return
	}
	if err := s.b.EndLease(chi.URLParam(r, "id"), lease); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
