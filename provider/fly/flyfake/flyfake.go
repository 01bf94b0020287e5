// Package flyfake is a fake Fly Machines API for tests: a real HTTP server
// on 127.0.0.1 that follows the API's public contract as documented (the
// Machines resource and machine states pages, and the rate limits of
// "Working with the Machines API").
//
// What it follows:
//   - Endpoints under /v1/apps/{app}/machines/{id}: GET (the machine), POST
//     (update with the full config), /start, /stop (signal, timeout),
//     /suspend, /wait (?state=started|stopped|suspended|destroyed,
//     &timeout= seconds, default 60, at most 60; &instance_id=, required
//     for stopped), /lease (POST, GET, DELETE), /metadata, /exec.
//   - Bearer token authentication (401), unknown app or machine (404).
//   - States and transitions with delays: stopped|created -> starting ->
//     started; suspended -> starting -> started (a resume, faster);
//     started -> stopping -> stopped; started -> suspending -> suspended;
//     update -> replacing -> starting -> started (or stopped with
//     skip_launch). Every update gives the machine a new instance_id.
//   - A wait answers 200 when the state (and instance) is reached, 408
//     when its timeout passes first.
//   - Leases: POST /lease answers 201 with a nonce, or 409 while another
//     holder's lease runs; while a lease runs, start, stop, suspend and
//     update need its nonce in fly-machine-lease-nonce (409 otherwise);
//     DELETE /lease needs the nonce (400 otherwise).
//   - Rate limits per machine and action: 1 request per second with bursts
//     of 3; Get Machine 5 per second with bursts of 10. A request over the
//     limit gets 429 with Retry-After and is counted by OverLimit.
//
// Where the public contract is silent the fake picks one documented-looking
// answer and says so: a start of an active or changing machine, and a
// suspend of a machine not started, answer 412; a start answers
// {"previous_state": ...}.
//
// Test controls: Stick keeps a machine in starting, Wedge makes it ignore
// stop and suspend, HoldLease takes the lease as another client, Storm
// answers the next n requests 429, and Calls records every request in
// order.
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

// Delays are how long each transition takes. Zero fields take the
// defaults of New.
type Delays struct {
	Start   time.Duration // stopped -> started; default 40ms
	Resume  time.Duration // suspended -> started; default 15ms
	Stop    time.Duration // started -> stopped; default 25ms
	Suspend time.Duration // started -> suspended; default 25ms
	Replace time.Duration // an update's replacing phase; default 30ms
}

// Options configure a Server.
type Options struct {
	App    string // the app; default "homes"
	Token  string // the bearer token; default "test-token"
	Delays Delays
	// OnState, when set, is told every state change, in order, on a
	// goroutine of the server's own (never under its lock).
	OnState func(Machine)
	// Exec answers POST .../exec for a started machine. Nil: stdout is
	// the tag of the machine's image and a newline, exit code 0.
	Exec func(m Machine, cmd string) (stdout string, exit int)
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
	noSuspend           bool
	lease               *lease
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
	d := &o.Delays
	for _, f := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&d.Start, 40 * time.Millisecond}, {&d.Resume, 15 * time.Millisecond}, {&d.Stop, 25 * time.Millisecond},
		{&d.Suspend, 25 * time.Millisecond}, {&d.Replace, 30 * time.Millisecond}} {
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	s := &Server{
		o:        o,
		machines: make(map[string]*machine),
		changed:  make(chan struct{}),
		limits:   make(map[limitKey]*rate.Limiter),
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

// NoSuspend makes the API refuse to suspend machine id (422), as it does
// for a machine too large to snapshot.
func (s *Server) NoSuspend(id string, on bool) { s.with(id, func(m *machine) { m.noSuspend = on }) }

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
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		s.mu.Lock()
		m, ok := s.machines[id]
		reached := ok && m.state == state
		ch := s.changed
		s.mu.Unlock()
		if reached {
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

// AwaitCall blocks until at least n calls whose String is call (e.g.
// "wait suspended", "lease") were received, or until timeout; it reports
// whether they were.
func (s *Server) AwaitCall(call string, n int, timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		s.mu.Lock()
		seen := 0
		for _, c := range s.calls {
			if c.String() == call {
				seen++
			}
		}
		ch := s.changed
		s.mu.Unlock()
		if seen >= n {
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

func writeError(w http.ResponseWriter, status int, format string, args ...any) {
	writeJSON(w, status, map[string]string{"error": fmt.Sprintf(format, args...)})
}
