// Package admin serves wakegate's admin API (/admin/...), /metrics and the
// dashboard (/, /assets/...) over a narrow interface. The control plane
// implements Backend (adminapi.Backend), the gateway opens the admin
// listener and mounts Server.Handler on it; this package knows nothing of
// either's internals.
//
// Every request passes, in order (auth.go):
//
//  1. the Host check: only the listener's own address (and the loopback
//     names on its port, and the configured extra hosts); a DNS-rebinding
//     page names its own host and is refused with 403;
//  2. the cross-site check: an Origin other than the listener's own, or
//     Sec-Fetch-Site: cross-site, is refused with 403;
//  3. the token check (all but the dashboard's static files): a bearer
//     token, compared in constant time and checked first, so a valid one
//     always passes; 401 without or with a wrong one, and 429 with
//     Retry-After for the failures of a client IP that failed too often
//     (or of all clients, past a global cap). A request on the admin
//     socket is authenticated by its peer's credentials, which the
//     gateway checked at accept, and skips the Host check and this one.
//
// Every error is a *fault.Error written by one function (errors.go): the
// status comes from fault.Classify, and the body, for operators, carries
// the cause and the hint as well as the code and the message.
//
// DESIGN rules that live here: 31 (the operator's powers: the token is
// checked first and only failures are limited, so no tenant can lock the
// operator out; the socket's peer check), 23 for the operator's side (the
// cause and hint reach operators only).
package admin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/wakegate/wakegate/appstatus"
	"github.com/wakegate/wakegate/events"
	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/registry"
)

// Backend is everything the admin API asks of the control plane.
//
// Methods return *fault.Error values for failures a caller can act on
// (fault.NotFound for an unknown id or slug, fault.Invalid with Field for a
// bad request, fault.Conflict for a stale If-Match, fault.Busy, ...); any
// other error is answered as an internal failure with its text as the
// cause. ifMatch arguments are a record generation, 0 when the request
// named none.
type Backend interface {
	Homes
	Target
	Apps
	Instance
}

// Homes registers, lists and acts on homes.
type Homes interface {
	// ListHomes returns every home this gateway routes, by id.
	ListHomes(ctx context.Context) ([]HomeView, error)
	// GetHome returns one home, with its recent restarts.
	GetHome(ctx context.Context, id string) (HomeView, error)
	// PutHome registers home id or replaces it; created reports which.
	PutHome(ctx context.Context, id string, req HomeRequest, ifMatch uint64) (v HomeView, created bool, err error)
	// DeleteHome stops and removes home id.
	DeleteHome(ctx context.Context, id string, ifMatch uint64) error
	// WakeHome wakes home id and, with wait, returns once it is ready;
	// without, once the wake has started.
	WakeHome(ctx context.Context, id string, wait bool) (HomeView, error)
	// SuspendHome suspends home id (refused while it has sessions).
	SuspendHome(ctx context.Context, id string) (HomeView, error)
	// RollHome moves home id onto the registered target version now.
	RollHome(ctx context.Context, id string) (HomeView, error)
	// RefreshHome asks home id's provider for its state and makes the
	// stored record agree; a provider that does not answer is no error.
	RefreshHome(ctx context.Context, id string) (RefreshView, error)
	// AddLease holds a session on home id for ttl and returns its id.
	AddLease(id string, ttl time.Duration) (uint64, error)
	// EndLease ends a lease (fault.NotFound when it is not live).
	EndLease(id string, lease uint64) error
	// HomeLog says where home id's log is (fault.NotFound for a home
	// whose provider keeps no log here).
	HomeLog(id string) (LogSource, error)
}

// Target reads and registers the roll target.
type Target interface {
	// GetTarget returns the stored target (fault.NotFound when none).
	GetTarget(ctx context.Context) (registry.Target, error)
	// SetTarget registers t as the target.
	SetTarget(ctx context.Context, t registry.Target, ifMatch uint64) (registry.Target, error)
}

// Apps registers, observes and operates apps.
type Apps interface {
	// ListApps returns every app this gateway routes, by slug.
	ListApps() []AppView
	// GetApp returns one app.
	GetApp(slug string) (AppView, error)
	// PutApp registers app slug from body, or replaces it.
	PutApp(ctx context.Context, slug string, body Body, ifMatch uint64) (v AppView, created bool, err error)
	// DeleteApp removes an app registered through the API.
	DeleteApp(ctx context.Context, slug string, ifMatch uint64) error
	// RefreshApp observes slug now and, with a wait phase, until it is in
	// that phase. An app that failed is no error: its view says so.
	RefreshApp(ctx context.Context, slug string, wait appstatus.Phase) (AppView, error)
	// StartApp, StopApp and RestartApp run an app operation and wait up to
	// budget (0: the engine's default) for its phase. When the wait runs
	// out they return the app's view with a fault.Timeout error.
	StartApp(ctx context.Context, slug string, budget time.Duration) (AppView, error)
	StopApp(ctx context.Context, slug string, budget time.Duration) (AppView, error)
	RestartApp(ctx context.Context, slug string, budget time.Duration) (AppView, error)
	// ListRoutes returns this instance's route table.
	ListRoutes() []RouteView
}

// Instance describes the gateway itself.
type Instance interface {
	// About returns the instance's name, version and state.
	About() About
	// Events returns the engine's event bus (nil when there is none).
	Events() *events.Bus
}

// About is what the status route says of the instance itself.
type About struct {
	Instance  string
	Version   string
	StartedAt time.Time
	Draining  bool
	// Degraded says why the fleet's shared store does not answer; "" while
	// it does (and for a gateway on its own store).
	Degraded string
	// Warnings are what an operator should know that does not make the
	// instance unhealthy, one sentence each with the way out: what the
	// configuration leaves shared between tenants (homes of several owners
	// on one origin, a shared relay token, exec homes that share the
	// gateway's user).
	Warnings []string
	// Containment says how the processes of local (exec) homes are kept
	// track of and why: what the machine offers. "" without exec homes.
	Containment string
	// BodyBudget is what request bodies read ahead of their forward hold
	// now against their budget; nil when the backend does not say.
	BodyBudget *BodyBudget
}

// BodyBudget is what request bodies read ahead of their forward (in
// memory and spool files) hold against proxy.body_budget_client and
// proxy.body_budget_total.
type BodyBudget struct {
	// UsedBytes is reserved now, by Clients client addresses.
	UsedBytes int64 `json:"used_bytes"`
	Clients   int   `json:"clients"`
	// PerClientBytes and TotalBytes are the budgets; 0 is none.
	PerClientBytes int64 `json:"per_client_bytes"`
	TotalBytes     int64 `json:"total_bytes"`
	// Refused counts the bodies refused since the start (503 or 413).
	Refused int64 `json:"refused"`
}

// Options configures a Server.
type Options struct {
	// Tokens are the accepted bearer tokens (resolved secrets). Required.
	Tokens []string
	// Hosts are the Host values the listener answers (see AllowedHosts).
	Hosts map[string]bool
	// AuthFailuresPerMinute is how many failed token checks a client IP may
	// make per minute before it gets 429. Must be at least 1.
	AuthFailuresPerMinute int
	// Metrics serves /metrics (behind the token); nil answers 404.
	Metrics http.Handler
	// Backup serves GET /admin/store/backup (behind the token): a
	// consistent copy of the store; nil answers 404.
	Backup http.Handler
	// Certificates serves GET /admin/certificates (behind the token): the
	// TLS front door's names and certificates; nil answers 404.
	Certificates http.Handler
	// OnAuthFailure and OnRateLimited count failed token checks and
	// refusals of a rate-limited client; nil for none.
	OnAuthFailure func()
	OnRateLimited func()
	// WaitTimeout bounds a home's wake and roll. Required.
	WaitTimeout time.Duration
	// Log receives one line per failed request, with its cause.
	Log *slog.Logger
}

// Server is the admin API's handler.
type Server struct {
	b      Backend
	o      Options
	log    *slog.Logger
	tokens [][sha256.Size]byte // hashes: equal length for the comparison
	// tokenNames name each token in the log of admin writes (audit.go).
	tokenNames []string
	fails      *failures
	handler    http.Handler
	router     chi.Routes // the routes behind the checks (Routes)
	reqPre     string
	reqSeq     atomic.Uint64
}

// New returns the admin API over b.
func New(b Backend, o Options) *Server {
	s := &Server{b: b, o: o, log: o.Log, fails: newFailures(o.AuthFailuresPerMinute)}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	for i, t := range o.Tokens {
		sum := sha256.Sum256([]byte(t))
		s.tokens = append(s.tokens, sum)
		s.tokenNames = append(s.tokenNames, tokenName(i, sum))
	}
	var p [4]byte
	_, _ = rand.Read(p[:])
	s.reqPre = "adm-" + hex.EncodeToString(p[:]) + "-"
	s.handler = s.guard(s.routes())
	return s
}

// Handler returns the handler to mount on the admin listener.
func (s *Server) Handler() http.Handler { return s.handler }

// routes builds the router behind the Host and cross-site checks.
func (s *Server) routes() http.Handler {
	r := chi.NewRouter()
	s.router = r
	r.NotFound(s.noRoute)
	r.MethodNotAllowed(s.methodNotAllowed)
	r.Get("/", s.serveDashboard)
	r.Get("/assets/{file}", s.serveAsset)
	r.Group(func(r chi.Router) {
		r.Use(s.requireToken)
		r.Use(s.logWrites)
		if s.o.Metrics != nil {
			r.Method(http.MethodGet, "/metrics", s.o.Metrics)
		}
		r.Get("/admin/status", s.serveStatus)
		r.Get("/admin/openapi.json", s.serveOpenAPI)
		if s.o.Certificates != nil {
			r.Method(http.MethodGet, "/admin/certificates", s.o.Certificates)
		}
		if s.o.Backup != nil {
			r.Method(http.MethodGet, "/admin/store/backup", s.o.Backup)
		}
		s.homeRoutes(r)
		r.Get("/admin/target", s.getTarget)
		r.Put("/admin/target", s.putTarget)
		s.appRoutes(r)
		s.reloadRoutes(r) // reload.go
		r.Get("/admin/events", s.serveEvents)
		s.accessRoutes(r)
		r.HandleFunc("/admin/*", s.noRoute)
	})
	return r
}

// noRoute answers a path the admin API does not serve.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	s.fail(w, r, fault.New(fault.NotFound, "not_found", "no admin route for this path"))
}

// requestID numbers admin requests: a random prefix per process and a
// sequence.
func (s *Server) requestID() string {
	return s.reqPre + strconv.FormatUint(s.reqSeq.Add(1), 16)
}
