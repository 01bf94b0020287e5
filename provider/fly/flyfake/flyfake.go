// Package flyfake is a fake Fly Machines API for tests: a real HTTP server
// on 127.0.0.1 that follows the API's public contract and the habits of
// the real service that Fly's own clients are written against. Each
// behaviour names where it was taken from, so that it can be checked
// again: [states] is docs/machines/machine-states (superfly/docs), [api]
// the Machines resource reference (machines/api/machines-resource and
// reference/machines/*.erb), [limits] "Working with the Machines API",
// [suspend] reference/suspend-resume, [fly-go] superfly/fly-go flaps/,
// [flyctl] superfly/flyctl internal/machine and internal/command/machine.
// "guessed" marks an answer no source states; the provider must not
// depend on more of it than the text named.
//
// What it follows:
//   - Endpoints under /v1/apps/{app}/machines/{id} [api]: GET (the
//     machine), POST (update with the full config), /start, /stop (signal,
//     timeout), /suspend, /wait (?state=started|stopped|suspended|destroyed,
//     &timeout= seconds, default 60, at most 60; &instance_id=, required
//     for stopped), /lease (POST, GET, DELETE), /metadata, /exec.
//   - Bearer token authentication (401), unknown app or machine (404).
//   - States [states]: the persistent created, started, stopped,
//     suspended, failed; the transient creating, starting, stopping,
//     restarting, suspending, destroying, launch_failed, updating,
//     replacing; the terminal destroyed, replaced, migrated (SetState
//     puts a machine in any of them).
//   - Transitions take realistic times [suspend]: a resume a few hundred
//     ms, a cold start about 2s, a stop about 1s, a suspend several
//     seconds, an update's replacing phase about 1s; Options.Scale shrinks
//     them all by one factor so tests stay fast and the order stays real.
//   - An update gives the machine a new instance_id and goes through
//     replacing [states]; what follows is Habits.AfterUpdate. By default a
//     machine that was started is started again and any other is left
//     stopped: [states] says an updated machine "may transition to
//     stopped", and [flyctl] update.go waits for the machine to settle
//     rather than for started (it used to wait for stopped when the
//     machine was not started before the update).
//   - A start answers 200 {"previous_state", "migrated", "new_host"}
//     [api], or 200 {"status": "error", "message"} when Habits.StartError
//     is set ([flyctl] command/machine/start.go treats that answer as a
//     failed start). A suspending machine may be started straight away,
//     cancelling the suspend (reported from Fly's changelog; no page of
//     [api] and no client code says it); Habits.NoStartFromSuspending
//     refuses it as older hosts do.
//   - A start of an active or changing machine, a suspend of a machine
//     not started, and an exec on a machine not started answer 412 with a
//     "failed_precondition: " message (the prefix as reported from real
//     answers). A start during replacing is refused so, with Fly's
//     wording "unable to start machine from current state" (quoted from
//     real logs in hexclave/hexclave#2060, which also quotes flyd leaving
//     an updated machine stopped when it was not started before).
//   - A wait answers 200 when the state (and instance) is reached, 408
//     "deadline_exceeded: ..." when its timeout passes first [api]. A wait
//     naming an instance that an update replaced answers 412 "...
//     currently replaced" ([flyctl] command/machine/wait.go retries on that
//     text; the status guessed). A boot that Habits.CrashBoots makes fail
//     ends stopped, and a wait for started answers 412 "failed_precondition:
//     machine failed to reach desired state" ([flyctl] machine/wait.go
//     reads the text; the status guessed, Habits.CrashStatus changes it);
//     unless the machine's config.restart.policy is "no", flyd boots it
//     again after the start delay.
//   - Leases [api]: POST /lease {"description", "ttl"} answers 201 with a
//     nonce, or 409 {"status": "error", "code": "invalid", "message":
//     "machine ID ... lease currently held by OWNER, expires at
//     2006-01-02 15:04:05 +0000 UTC"} while another holder's lease runs
//     (reference/machines/_lease_resp.erb); POST /lease with the running
//     lease's nonce in fly-machine-lease-nonce renews it ([fly-go]
//     RefreshLease, which [flyctl] leasable_machine.go calls in the
//     background while it holds a lease); GET /lease answers the lease
//     with its nonce, as the reference's example does, or 404. While a
//     lease runs, start, stop, suspend and update need its nonce (409 with
//     the same message otherwise). A call that sends a nonce when no
//     lease runs, or the nonce of another lease, is refused 409 "lease not
//     found" (guessed wording); DELETE /lease without the running lease's
//     nonce answers 404 "lease not found" (guessed).
//   - Rate limits per machine and action [limits]: 1 request per second
//     with bursts of 3; Get Machine 5 per second with bursts of 10. A
//     request over the limit gets 429 with Retry-After and is counted by
//     OverLimit.
//   - Health checks [api]: a machine whose config declares "checks" (an
//     object keyed by check name) reports them in GET machine's "checks"
//     array, one {"name", "status", "output", "updated_at"} per check
//     (reference/machines/_list_resp.erb), status passing, warning or
//     critical. Until SetCheck gives one a status, a check of a booted
//     machine is "warning" with an empty output (guessed: no source says
//     what a check reports before its first run); every boot clears them.
//
// Test controls: Habits sets a machine's habits (above; SuspendRefusal
// answers every suspend with a status of the test's choosing, as [suspend]
// names the requirements of suspend but not how a refusal is answered;
// ReplaceAfterGet has another client update the machine right after a
// GET answered, as during someone else's deploy), Stick keeps a machine in
// starting, Wedge makes it ignore stop and suspend, HoldLease and
// TryLease take the lease as another client, SetCheck sets a health
// check's status, Fail answers the next calls
// of an action with a status (after carrying the call out, when the
// answer is to be lost on the way), Storm answers the next n requests
// 429, and Calls records every request in order.
package flyfake

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Delays are how long each transition takes.
type Delays struct {
	Start   time.Duration // stopped -> started (a cold boot)
	Resume  time.Duration // suspended -> started
	Stop    time.Duration // started -> stopped
	Suspend time.Duration // started -> suspended
	Replace time.Duration // an update's replacing phase
}

// Realistic are the transition times of the real service: a resume takes
// a few hundred milliseconds and a cold start about 2s (reference/
// suspend-resume, "Typical performance"); a suspend of a small machine
// several seconds, of a large one over 15s; stop and replace about a
// second (observed, not documented).
var Realistic = Delays{Start: 2 * time.Second, Resume: 300 * time.Millisecond, Stop: time.Second,
	Suspend: 5 * time.Second, Replace: time.Second}

// DefaultScale is the Scale of Options that leave it zero: Realistic at a
// hundredth, so a cold start takes 20ms.
const DefaultScale = 0.01

// Options configure a Server.
type Options struct {
	App   string // the app; default "homes"
	Token string // the bearer token; default "test-token"
	// Delays are the transition times; a zero field is the Realistic one
	// times Scale. A field set here is used as it is.
	Delays Delays
	// Scale multiplies the Realistic delays. Zero: DefaultScale.
	Scale float64
	// OnState, when set, is told every state change, in order, on a
	// goroutine of the server's own (never under its lock).
	OnState func(Machine)
	// Exec answers POST .../exec for a started machine. Nil: stdout is
	// the tag of the machine's image and a newline, exit code 0.
	Exec func(m Machine, cmd string) (stdout string, exit int)
}

// What an update leaves the machine in once replacing ends
// (Habits.AfterUpdate).
const (
	// UpdateAsBefore: started if the machine was started (or starting)
	// before the update, stopped otherwise. The default.
	UpdateAsBefore = ""
	// UpdateStarted: always started (the update launches the machine).
	UpdateStarted = "started"
	// UpdateStopped: always stopped.
	UpdateStopped = "stopped"
)

// Habits are how one machine behaves where Fly may answer more than one
// way. The zero value is the default of each field.
type Habits struct {
	// AfterUpdate is what an update leaves: UpdateAsBefore (default),
	// UpdateStarted or UpdateStopped. skip_launch always leaves stopped.
	AfterUpdate string
	// StartError, when set, answers every start 200 {"status": "error",
	// "message": StartError}; the machine does not move.
	StartError string
	// SuspendRefusal, when set, answers every suspend with this status
	// and a message saying the machine cannot be suspended.
	SuspendRefusal int
	// NoStartFromSuspending refuses (412) a start of a suspending machine.
	NoStartFromSuspending bool
	// CrashBoots makes the next n boots fail: the machine goes from
	// starting to stopped, and a wait for started fails (CrashStatus).
	CrashBoots int
	// CrashStatus is the status of that failed wait. Zero: 412.
	CrashStatus int
	// ReplaceAfterGet has another client update the machine (same
	// config, new instance) right after each of the next n GETs answered.
	ReplaceAfterGet int
}

// Machine is a machine as the fake holds it (a copy).
type Machine struct {
	ID         string
	State      string
	InstanceID string
	Image      string
	Metadata   map[string]string
	LeaseOwner string // "" when no lease runs
}

// Call is one request the fake received.
type Call struct {
	// Action names the request: "get", "update", "start", "stop",
	// "suspend", "wait", "lease", "get lease", "release", "metadata",
	// "exec".
	Action  string
	Machine string
	Query   string // the raw query (wait: state, timeout, instance_id)
	Nonce   string // the fly-machine-lease-nonce header
	Body    string // the request body (stop: signal and timeout)
	Status  int    // the answer's status; 0 while it is being served
	At      time.Time
}

// String is the call's short form, e.g. "wait state=started", "start 200".
func (c Call) String() string {
	s := c.Action
	if c.Action == "wait" {
		s += " " + c.waitState()
	}
	return s
}

func (c Call) waitState() string {
	for _, kv := range strings.Split(c.Query, "&") {
		if v, ok := strings.CutPrefix(kv, "state="); ok {
			return v
		}
	}
	return "started"
}

type machine struct {
	id, state, instance string
	config              map[string]any
	gen                 uint64 // bumped by every state change; a stale timer does nothing
	stuck, wedged       bool
	habits              Habits
	crashed             bool   // the last boot failed (a wait for started fails)
	replaced            string // instance ids an update replaced, space-separated
	lease               *lease
	checks              map[string]checkStatus // set by SetCheck; every boot clears them
	// visits are the last states entered, so that a wait sees a state the
	// machine passed through while the waiter was not looking.
	visits []visit
}

// visit is one state entered, at generation gen.
type visit struct {
	state, instance string
	gen             uint64
}

// maxVisits bounds a machine's visits.
const maxVisits = 64

// visitedSince reports whether m entered state (on instance, when given)
// after generation gen.
func (m *machine) visitedSince(gen uint64, state, instance string) bool {
	for _, v := range m.visits {
		if v.gen > gen && v.state == state && (instance == "" || v.instance == instance) {
			return true
		}
	}
	return false
}

type lease struct {
	nonce, owner, description string
	expires                   time.Time
}

type limitKey struct{ machine, action string }

// Server is the fake API. Close stops it.
type Server struct {
	o   Options
	srv *httptest.Server
	// URL is the base URL, e.g. http://127.0.0.1:40123.
	URL string

	mu        sync.Mutex
	machines  map[string]*machine
	calls     []Call
	changed   chan struct{} // closed and replaced on every state change
	limits    map[limitKey]*rate.Limiter
	storm     int
	stormWait time.Duration
	fails     map[string]*failure // by action
	overLimit int
	injected  int
	timers    map[*time.Timer]struct{}
	closed    bool
	pending   []Machine     // state changes not yet told to OnState
	kick      chan struct{} // wakes the notifier
	done      chan struct{} // closed by Close
	notified  chan struct{} // closed when the notifier has returned
}

// New starts a fake API on 127.0.0.1:0.
func New(o Options) *Server {
	if o.App == "" {
		o.App = "homes"
	}
	if o.Token == "" {
		o.Token = "test-token"
	}
	if o.Scale <= 0 {
		o.Scale = DefaultScale
	}
	d := &o.Delays
	for _, f := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&d.Start, Realistic.Start}, {&d.Resume, Realistic.Resume}, {&d.Stop, Realistic.Stop},
		{&d.Suspend, Realistic.Suspend}, {&d.Replace, Realistic.Replace}} {
		if *f.v == 0 {
			*f.v = time.Duration(float64(f.def) * o.Scale)
		}
	}
	s := &Server{
		o:        o,
		machines: make(map[string]*machine),
		changed:  make(chan struct{}),
		limits:   make(map[limitKey]*rate.Limiter),
		fails:    make(map[string]*failure),
		timers:   make(map[*time.Timer]struct{}),
		kick:     make(chan struct{}, 1),
		done:     make(chan struct{}),
		notified: make(chan struct{}),
	}
	s.srv = httptest.NewServer(s.routes())
	s.URL = s.srv.URL
	go s.notifier()
	return s
}

// Close stops the server, its timers and its notifier.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	for t := range s.timers {
		t.Stop()
	}
	s.timers = nil
	close(s.done)
	s.mu.Unlock()
	s.srv.Close()
	<-s.notified
}

// App returns the app's name.
func (s *Server) App() string { return s.o.App }

// Token returns the bearer token the fake accepts.
func (s *Server) Token() string { return s.o.Token }

// MachineSpec describes a machine to add.
type MachineSpec struct {
	State    string            // default "stopped"
	Image    string            // default "registry.fly.io/homes:v1"
	Metadata map[string]string // config.metadata
	// Config is the rest of the machine's config (guest, mounts,
	// services...), kept whole across updates.
	Config map[string]any
}

// AddMachine adds machine id.
func (s *Server) AddMachine(id string, sp MachineSpec) {
	if sp.State == "" {
		sp.State = "stopped"
	}
	if sp.Image == "" {
		sp.Image = "registry.fly.io/homes:v1"
	}
	cfg := map[string]any{}
	for k, v := range sp.Config {
		cfg[k] = v
	}
	cfg["image"] = sp.Image
	md := map[string]any{}
	for k, v := range sp.Metadata {
		md[k] = v
	}
	cfg["metadata"] = md
	s.mu.Lock()
	defer s.mu.Unlock()
	m := &machine{id: id, instance: newID(), config: cfg}
	s.machines[id] = m
	s.setLocked(m, sp.State)
}

// Machine returns a copy of machine id; ok is false when there is none.
func (s *Server) Machine(id string) (Machine, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.machines[id]
	if !ok {
		return Machine{}, false
	}
	return m.view(time.Now()), true
}

func (m *machine) view(now time.Time) Machine {
	v := Machine{ID: m.id, State: m.state, InstanceID: m.instance, Metadata: map[string]string{}}
	v.Image, _ = m.config["image"].(string)
	if md, ok := m.config["metadata"].(map[string]any); ok {
		for k, x := range md {
			if s, ok := x.(string); ok {
				v.Metadata[k] = s
			}
		}
	}
	if l := m.activeLease(now); l != nil {
		v.LeaseOwner = l.owner
	}
	return v
}

func (m *machine) activeLease(now time.Time) *lease {
	if m.lease != nil && now.Before(m.lease.expires) {
		return m.lease
	}
	return nil
}

// Stick keeps machine id in starting: a start never completes (until
// Stick(id, false) and another start or an update).
func (s *Server) Stick(id string, on bool) { s.with(id, func(m *machine) { m.stuck = on }) }

// Wedge makes machine id ignore the end of stop and suspend: it stays in
// stopping or suspending.
func (s *Server) Wedge(id string, on bool) { s.with(id, func(m *machine) { m.wedged = on }) }

// NoSuspend makes the API refuse to suspend machine id with a 422, one of
// the answers a machine that cannot be snapshotted may get.
func (s *Server) NoSuspend(id string, on bool) {
	s.Habits(id, func(h *Habits) {
		h.SuspendRefusal = 0
		if on {
			h.SuspendRefusal = http.StatusUnprocessableEntity
		}
	})
}

// Habits changes machine id's habits.
func (s *Server) Habits(id string, f func(*Habits)) { s.with(id, func(m *machine) { f(&m.habits) }) }

// failure is what Fail set for one action.
type failure struct {
	n, status int
	applied   bool
}

// Fail answers the next n calls of action (as named in Call.Action) with
// status and an error body. With applied, each call is carried out first
// and only its answer is replaced, as when the answer is lost on the way
// back (a 502 from a proxy after the API acted).
func (s *Server) Fail(action string, n, status int, applied bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fails[action] = &failure{n: n, status: status, applied: applied}
}

// TryLease takes machine id's lease for ttl as another client named owner
// when no lease runs, and reports whether it did.
func (s *Server) TryLease(id, owner string, ttl time.Duration) bool {
	took := false
	s.with(id, func(m *machine) {
		if m.activeLease(time.Now()) == nil {
			m.lease = &lease{nonce: newNonce(), owner: owner, expires: time.Now().Add(ttl)}
			took = true
		}
	})
	return took
}

// SetState puts machine id in state at once, as if something outside the
// gateway changed it.
func (s *Server) SetState(id, state string) { s.with(id, func(m *machine) { s.setLocked(m, state) }) }

func (s *Server) with(id string, f func(*machine)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.machines[id]; ok {
		f(m)
	}
}

// HoldLease takes machine id's lease for ttl as another client named owner
// and returns its nonce.
func (s *Server) HoldLease(id, owner string, ttl time.Duration) string {
	nonce := newNonce()
	s.with(id, func(m *machine) {
		m.lease = &lease{nonce: nonce, owner: owner, expires: time.Now().Add(ttl)}
	})
	return nonce
}

// ReleaseLease ends machine id's lease, whoever holds it.
func (s *Server) ReleaseLease(id string) { s.with(id, func(m *machine) { m.lease = nil }) }

// Storm answers the next n requests 429, with Retry-After when retryAfter
// is positive (rounded up to whole seconds).
func (s *Server) Storm(n int, retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.storm, s.stormWait = n, retryAfter
}

// Calls returns every request received since the last Reset, in order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// Reset forgets the recorded calls.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = nil
}

// OverLimit returns how many requests came over the documented rate limit.
func (s *Server) OverLimit() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.overLimit
}

// Injected returns how many requests Storm answered 429.
func (s *Server) Injected() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.injected
}

// AwaitState blocks until machine id is in state or until timeout; it
// reports whether the state was reached. Tests wait for an observed state
// with it rather than sleeping.
func (s *Server) AwaitState(id, state string, timeout time.Duration) bool {
	return s.await(timeout, func() bool {
		m, ok := s.machines[id]
		return ok && m.state == state
	})
}

// AwaitCall blocks until at least n calls whose String is call (e.g.
// "wait suspended", "lease") were received, or until timeout; it reports
// whether they were.
func (s *Server) AwaitCall(call string, n int, timeout time.Duration) bool {
	return s.await(timeout, func() bool {
		seen := 0
		for _, c := range s.calls {
			if c.String() == call {
				seen++
			}
		}
		return seen >= n
	})
}

// await checks reached (under the lock) at once and after every change,
// until it holds, timeout passes or the server closes; it reports whether
// reached held.
func (s *Server) await(timeout time.Duration, reached func() bool) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		s.mu.Lock()
		ok := reached()
		ch := s.changed
		s.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-t.C:
			return false
		case <-s.done:
			return false
		}
	}
}

// broadcastLocked wakes everything waiting for a change (waits, AwaitState,
// AwaitCall).
func (s *Server) broadcastLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// setLocked moves m to state, ends its pending transition, wakes waiters
// and queues the change for OnState.
func (s *Server) setLocked(m *machine, state string) {
	m.state = state
	m.gen++
	if len(m.visits) == maxVisits {
		m.visits = append(m.visits[:0], m.visits[1:]...)
	}
	m.visits = append(m.visits, visit{state: state, instance: m.instance, gen: m.gen})
	s.broadcastLocked()
	if s.o.OnState != nil {
		s.pending = append(s.pending, m.view(time.Now()))
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// laterLocked runs f (under the lock) after d, unless m changed state
// meanwhile or the server closed.
func (s *Server) laterLocked(m *machine, d time.Duration, f func()) {
	if s.closed {
		return
	}
	gen := m.gen
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed {
			return
		}
		delete(s.timers, t)
		if m.gen == gen {
			f()
		}
	})
	s.timers[t] = struct{}{}
}

// notifier tells OnState every queued change, in order.
func (s *Server) notifier() {
	defer close(s.notified)
	for {
		select {
		case <-s.done:
			return
		case <-s.kick:
		}
		s.mu.Lock()
		batch := s.pending
		s.pending = nil
		s.mu.Unlock()
		for _, m := range batch {
			s.o.OnState(m)
		}
	}
}

func newID() string {
	b := make([]byte, 13)
	_, _ = rand.Read(b)
	return strings.ToUpper(hex.EncodeToString(b))[:26]
}

func newNonce() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers {"error": message}; a 412's message starts with
// "failed_precondition: " as the real service's do.
func writeError(w http.ResponseWriter, status int, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if status == http.StatusPreconditionFailed && !strings.HasPrefix(msg, "failed_precondition: ") {
		msg = "failed_precondition: " + msg
	}
	writeJSON(w, status, map[string]string{"error": msg})
}
