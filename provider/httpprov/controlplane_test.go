package httpprov

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// testSecret is the key the tests' control plane and clients share.
var testSecret = []byte("0123456789abcdef-test-secret")

// cpHome is one home as the test control plane keeps it.
type cpHome struct {
	state   string
	version string
	ref     int
	wakes   int // how many times a wake or recreate really started it
}

// seenReq is one verified request.
type seenReq struct {
	method, target, key, nonce string
}

// controlPlane is a real control plane on loopback that checks every
// signature with a Verifier, keeps homes' states, and does each
// idempotency key's operation once. Its homes run at homeURL, a real
// loopback server that answers GET /version.
type controlPlane struct {
	t       *testing.T
	srv     *httptest.Server
	homeURL string
	base    string // the contract's base URL (below a path prefix)

	// Knobs, set before use.
	manual    bool    // a wake answers 202 starting; the home runs on finish
	longPoll  bool    // a status GET with wait= is held until the state changes
	dropFirst bool    // the first answer to each key is lost (503) after the work is done
	noSuspend bool    // suspend answers 501
	refuse    *Answer // every POST is answered with this, at status refuseStatus
	refuseN   int     // how many POSTs are refused (0: all)
	refuseSt  int
	polled    chan string // each status GET's request target, if set (never blocks)

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every state change
	homes   map[string]*cpHome
	done    map[string]cpAnswer // idempotency key -> the answer given
	dropped map[string]bool
	seen    []seenReq
	bodies  []Request // every POST's body
	refused int
}

type cpAnswer struct {
	status int
	a      Answer
}

// newControlPlane starts a control plane and the home server it fronts.
func newControlPlane(t *testing.T) *controlPlane {
	t.Helper()
	home := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/version" {
			_, _ = w.Write([]byte("7\n"))
			return
		}
		_, _ = w.Write([]byte("home"))
	}))
	t.Cleanup(home.Close)
	cp := &controlPlane{t: t, homeURL: home.URL, changed: make(chan struct{}),
		homes: map[string]*cpHome{}, done: map[string]cpAnswer{}, dropped: map[string]bool{}}
	v := NewVerifier(testSecret, time.Minute, nil)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /cp/homes/{id}", cp.status)
	mux.HandleFunc("POST /cp/homes/{id}/{op}", cp.operate)
	cp.srv = httptest.NewServer(v.Middleware(cp.record(mux)))
	t.Cleanup(cp.srv.Close)
	cp.base = cp.srv.URL + "/cp"
	return cp
}

// record notes each verified request.
func (cp *controlPlane) record(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cp.mu.Lock()
		cp.seen = append(cp.seen, seenReq{r.Method, r.RequestURI, r.Header.Get(HeaderIdempotencyKey), r.Header.Get(HeaderNonce)})
		cp.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

// home returns (creating) home id; cp.mu is held.
func (cp *controlPlane) home(id string) *cpHome {
	h, ok := cp.homes[id]
	if !ok {
		h = &cpHome{state: "stopped", version: "1"}
		cp.homes[id] = h
	}
	return h
}

// setState changes a home's state and wakes the long polls.
func (cp *controlPlane) setState(id, state string) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.setLocked(id, state)
}

func (cp *controlPlane) setLocked(id, state string) {
	cp.home(id).state = state
	close(cp.changed)
	cp.changed = make(chan struct{})
}

func (cp *controlPlane) answerOf(id string) Answer {
	h := cp.home(id)
	a := Answer{State: h.state, Version: h.version, Ref: "m-" + strconv.Itoa(h.ref)}
	if h.state == "running" {
		a.Endpoint = cp.homeURL
	}
	return a
}

func (cp *controlPlane) operate(w http.ResponseWriter, r *http.Request) {
	var req Request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.ID != r.PathValue("id") {
		WriteAnswer(w, http.StatusBadRequest, Answer{Code: "bad_request", Reason: "the body does not name the home"})
		return
	}
	key := r.Header.Get(HeaderIdempotencyKey)
	cp.mu.Lock()
	cp.bodies = append(cp.bodies, req)
	if cp.refuse != nil && (cp.refuseN == 0 || cp.refused < cp.refuseN) {
		cp.refused++
		a, st := *cp.refuse, cp.refuseSt
		cp.mu.Unlock()
		WriteAnswer(w, st, a)
		return
	}
	ans, ok := cp.done[key]
	if !ok {
		ans = cp.apply(r.PathValue("op"), req)
		cp.done[key] = ans
	}
	drop := cp.dropFirst && !cp.dropped[key]
	cp.dropped[key] = true
	cp.mu.Unlock()
	if drop {
		WriteAnswer(w, http.StatusBadGateway, Answer{Code: "lost", Reason: "the answer was lost on its way"})
		return
	}
	WriteAnswer(w, ans.status, ans.a)
}

// apply does one operation; cp.mu is held.
func (cp *controlPlane) apply(op string, req Request) cpAnswer {
	h := cp.home(req.ID)
	switch op {
	case OpWake, OpRecreate:
		if op == OpWake && h.state == "running" {
			return cpAnswer{http.StatusOK, cp.answerOf(req.ID)}
		}
		h.wakes++
		h.ref++
		if op == OpRecreate {
			h.version = req.Version
		}
		if cp.manual {
			cp.setLocked(req.ID, "starting")
			return cpAnswer{http.StatusAccepted, cp.answerOf(req.ID)}
		}
		cp.setLocked(req.ID, "running")
		return cpAnswer{http.StatusOK, cp.answerOf(req.ID)}
	case OpSuspend:
		if cp.noSuspend {
			return cpAnswer{http.StatusNotImplemented, Answer{Code: "unsupported", Reason: "homes here cannot be suspended"}}
		}
		cp.setLocked(req.ID, "paused")
		return cpAnswer{http.StatusOK, cp.answerOf(req.ID)}
	case OpStop:
		cp.setLocked(req.ID, "stopping")
		return cpAnswer{http.StatusAccepted, cp.answerOf(req.ID)}
	}
	return cpAnswer{http.StatusNotFound, Answer{Code: "unknown_operation", Reason: "no such operation"}}
}

// status answers GET /homes/{id}, holding a long poll until the home
// reaches the state asked for or the poll's timeout passes.
func (cp *controlPlane) status(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if cp.polled != nil {
		select {
		case cp.polled <- r.RequestURI:
		default:
		}
	}
	wait := r.URL.Query().Get("wait")
	secs, _ := strconv.Atoi(r.URL.Query().Get("timeout"))
	timer := time.NewTimer(time.Duration(secs) * time.Second)
	defer timer.Stop()
	for {
		cp.mu.Lock()
		h := cp.home(id)
		if h.state == "stopping" { // a stop finishes by the next look
			cp.setLocked(id, "stopped")
		}
		a, changed := cp.answerOf(id), cp.changed
		cp.mu.Unlock()
		if !cp.longPoll || wait == "" || phaseOf(a.State) == phaseOf(wait) {
			WriteAnswer(w, http.StatusOK, a)
			return
		}
		select {
		case <-changed:
		case <-timer.C:
			WriteAnswer(w, http.StatusOK, a)
			return
		case <-r.Context().Done():
			return
		}
	}
}

// finish makes a starting home run.
func (cp *controlPlane) finish(id string) { cp.setState(id, "running") }

// wakes is how many times home id was really started.
func (cp *controlPlane) wakes(id string) int {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.home(id).wakes
}

// requests returns the verified requests so far.
func (cp *controlPlane) requests() []seenReq {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return append([]seenReq(nil), cp.seen...)
}
