package flyfake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"
)

// nonceHeader carries a lease nonce.
const nonceHeader = "fly-machine-lease-nonce"

// limitGrace forgives a request that arrives this much early against the
// server's bucket: a client keeping to the limit exactly may see its
// requests bunched a little by the network.
const limitGrace = 250 * time.Millisecond

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	base := "/v1/apps/{app}/machines/{id}"
	for _, r := range []struct {
		pattern, action string
		h               func(http.ResponseWriter, *http.Request, *machine)
	}{
		{"GET " + base, "get", s.getMachine},
		{"POST " + base, "update", s.update},
		{"POST " + base + "/start", "start", s.start},
		{"POST " + base + "/stop", "stop", s.stop},
		{"POST " + base + "/suspend", "suspend", s.suspend},
		{"GET " + base + "/wait", "wait", nil},
		{"POST " + base + "/lease", "lease", s.takeLease},
		{"GET " + base + "/lease", "get lease", s.getLease},
		{"DELETE " + base + "/lease", "release", s.releaseLease},
		{"GET " + base + "/metadata", "metadata", s.metadata},
		{"POST " + base + "/exec", "exec", s.exec},
	} {
		mux.Handle(r.pattern, s.endpoint(r.action, r.h))
	}
	return mux
}

// endpoint wraps a handler: it records the call, checks the token, the
// app and the machine, and applies the rate limit and any storm. Every
// handler but wait runs under the server's lock.
func (s *Server) endpoint(action string, h func(http.ResponseWriter, *http.Request, *machine)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		r.Body = io.NopCloser(bytes.NewReader(body))
		id := r.PathValue("id")
		rec := &recorder{ResponseWriter: w}
		s.mu.Lock()
		idx := len(s.calls)
		s.calls = append(s.calls, Call{Action: action, Machine: id, Query: r.URL.RawQuery,
			Nonce: r.Header.Get(nonceHeader), Body: strings.TrimSpace(string(body)), At: time.Now()})
		s.broadcastLocked()
		defer func() {
			s.mu.Lock()
			if idx < len(s.calls) && s.calls[idx].Machine == id {
				s.calls[idx].Status = rec.status
			}
			s.mu.Unlock()
		}()
		m, ok := s.admitLocked(rec, r, action, id)
		if !ok {
			s.mu.Unlock()
			return
		}
		if f := s.fails[action]; f != nil && f.n > 0 {
			f.n--
			if f.applied && h != nil {
				h(discard{header: http.Header{}}, r, m)
			}
			writeError(rec, f.status, "injected failure of %s", action)
			s.mu.Unlock()
			return
		}
		if h == nil {
			// A wait counts the states the machine reaches from the
			// moment its call arrived: the caller may have seen the call
			// recorded and moved the machine on before wait takes the
			// lock again.
			since := m.gen
			s.mu.Unlock()
			s.wait(rec, r, m, since)
			return
		}
		h(rec, r, m)
		if action == "get" && m.habits.ReplaceAfterGet > 0 {
			m.habits.ReplaceAfterGet--
			s.replaceLocked(m, m.config, false)
		}
		s.mu.Unlock()
	})
}

// admitLocked checks a request before its handler; false when it has
// been answered.
func (s *Server) admitLocked(w http.ResponseWriter, r *http.Request, action, id string) (*machine, bool) {
	if r.Header.Get("Authorization") != "Bearer "+s.o.Token {
		writeError(w, http.StatusUnauthorized, "unauthorized")
		return nil, false
	}
	if r.PathValue("app") != s.o.App {
		writeError(w, http.StatusNotFound, "app not found")
		return nil, false
	}
	m, ok := s.machines[id]
	if !ok {
		writeError(w, http.StatusNotFound, "machine not found")
		return nil, false
	}
	k := limitKey{id, action}
	lim, ok := s.limits[k]
	if !ok {
		lim = rate.NewLimiter(1, 3)
		if action == "get" {
			lim = rate.NewLimiter(5, 10)
		}
		s.limits[k] = lim
	}
	now := time.Now()
	if res := lim.ReserveN(now, 1); !res.OK() || res.DelayFrom(now) > limitGrace {
		res.CancelAt(now)
		s.overLimit++
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, "rate limit exceeded")
		return nil, false
	}
	if s.storm > 0 {
		s.storm--
		s.injected++
		if s.stormWait > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(s.stormWait.Seconds()))))
		}
		writeError(w, http.StatusTooManyRequests, "rate limit exceeded")
		return nil, false
	}
	return m, true
}

// leasedLocked answers 409 when a lease runs on m and r does not carry
// its nonce, or when r carries a nonce that is not the running lease's.
func (s *Server) leasedLocked(w http.ResponseWriter, r *http.Request, m *machine) bool {
	l := m.activeLease(time.Now())
	nonce := r.Header.Get(nonceHeader)
	switch {
	case l == nil && nonce == "":
		return false
	case l != nil && nonce == l.nonce:
		return false
	case l != nil && nonce == "":
		leaseConflict(w, m, l)
	default:
		writeError(w, http.StatusConflict, "lease not found")
	}
	return true
}

// leaseConflict is Fly's answer to a client that does not hold the
// running lease (reference/machines/_lease_resp.erb).
func leaseConflict(w http.ResponseWriter, m *machine, l *lease) {
	writeJSON(w, http.StatusConflict, map[string]string{"status": "error", "code": "invalid",
		"message": fmt.Sprintf("machine ID %s lease currently held by %s, expires at %s", m.id, l.owner,
			l.expires.UTC().Format("2006-01-02 15:04:05 -0700 MST"))})
}

func (s *Server) getMachine(w http.ResponseWriter, _ *http.Request, m *machine) {
	writeJSON(w, http.StatusOK, s.machineJSON(m))
}

func (s *Server) machineJSON(m *machine) map[string]any {
	return map[string]any{
		"id": m.id, "name": "home-" + m.id, "state": m.state, "region": "ams",
		"instance_id": m.instance, "private_ip": "fdaa:0:1:a7b:1::2",
		"config": m.config, "events": []any{}, "checks": m.checksJSON(),
	}
}

func (s *Server) start(w http.ResponseWriter, r *http.Request, m *machine) {
	if s.leasedLocked(w, r, m) {
		return
	}
	prev := m.state
	switch prev {
	case "stopped", "created", "failed", "suspended":
	case "suspending":
		if m.habits.NoStartFromSuspending {
			writeError(w, http.StatusPreconditionFailed, "unable to start machine from current state: '%s'", prev)
			return
		}
	default:
		writeError(w, http.StatusPreconditionFailed, "unable to start machine from current state: '%s'", prev)
		return
	}
	if msg := m.habits.StartError; msg != "" {
		writeJSON(w, http.StatusOK, map[string]string{"status": "error", "message": msg})
		return
	}
	s.launchLocked(m, prev == "suspended" || prev == "suspending")
	writeJSON(w, http.StatusOK, map[string]any{"previous_state": prev, "migrated": false, "new_host": ""})
}

// launchLocked moves m to starting and, unless it is stuck, to started
// after the start (or resume) delay; a boot that CrashBoots fails ends
// stopped instead, and flyd boots it again unless the restart policy is
// "no".
func (s *Server) launchLocked(m *machine, resume bool) {
	m.crashed = false
	m.checks = nil
	s.setLocked(m, "starting")
	if m.stuck {
		return
	}
	d := s.o.Delays.Start
	if resume {
		d = s.o.Delays.Resume
	}
	s.laterLocked(m, d, func() {
		if m.habits.CrashBoots > 0 {
			m.habits.CrashBoots--
			m.crashed = true
			s.setLocked(m, "stopped")
			if restartPolicy(m.config) != "no" {
				s.laterLocked(m, s.o.Delays.Start, func() { s.launchLocked(m, false) })
			}
			return
		}
		s.setLocked(m, "started")
	})
}

// restartPolicy is config.restart.policy ("" when unset).
func restartPolicy(cfg map[string]any) string {
	r, _ := cfg["restart"].(map[string]any)
	p, _ := r["policy"].(string)
	return p
}

func (s *Server) stop(w http.ResponseWriter, r *http.Request, m *machine) {
	if s.leasedLocked(w, r, m) {
		return
	}
	var in struct {
		Signal  string `json:"signal"`
		Timeout string `json:"timeout"`
	}
	if err := decodeOptional(r, &in); err != nil {
		writeError(w, http.StatusBadRequest, "bad stop body: %v", err)
		return
	}
	switch m.state {
	case "stopped", "created":
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
		return
	case "destroyed", "destroying":
		writeError(w, http.StatusPreconditionFailed, "machine is %s", m.state)
		return
	}
	s.passLocked(m, "stopping", "stopped", s.o.Delays.Stop)
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

func (s *Server) suspend(w http.ResponseWriter, r *http.Request, m *machine) {
	if s.leasedLocked(w, r, m) {
		return
	}
	if st := m.habits.SuspendRefusal; st != 0 {
		writeError(w, st, "machine cannot be suspended: it has swap, a schedule, too much memory, or was not updated since suspend became available")
		return
	}
	switch m.state {
	case "suspended":
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
		return
	case "started":
	default:
		writeError(w, http.StatusPreconditionFailed, "unable to suspend machine from current state: '%s'", m.state)
		return
	}
	s.passLocked(m, "suspending", "suspended", s.o.Delays.Suspend)
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

// passLocked puts m in the passing state via, and in state to after d
// unless m is wedged (it then stays in via).
func (s *Server) passLocked(m *machine, via, to string, d time.Duration) {
	s.setLocked(m, via)
	if !m.wedged {
		s.laterLocked(m, d, func() { s.setLocked(m, to) })
	}
}

func (s *Server) update(w http.ResponseWriter, r *http.Request, m *machine) {
	if s.leasedLocked(w, r, m) {
		return
	}
	var in struct {
		Config     map[string]any `json:"config"`
		SkipLaunch bool           `json:"skip_launch"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeError(w, http.StatusBadRequest, "bad update body: %v", err)
		return
	}
	if img, _ := in.Config["image"].(string); img == "" {
		writeError(w, http.StatusUnprocessableEntity, "config.image is required")
		return
	}
	if m.state == "destroyed" || m.state == "destroying" {
		writeError(w, http.StatusPreconditionFailed, "machine is %s", m.state)
		return
	}
	s.replaceLocked(m, in.Config, in.SkipLaunch)
	writeJSON(w, http.StatusOK, s.machineJSON(m))
}

// replaceLocked gives m cfg and a new instance, through replacing, then
// leaves it as its AfterUpdate habit says.
func (s *Server) replaceLocked(m *machine, cfg map[string]any, skipLaunch bool) {
	wasUp := m.state == "started" || m.state == "starting"
	m.config = cfg
	m.replaced += " " + m.instance
	m.instance = newID()
	s.setLocked(m, "replacing")
	s.laterLocked(m, s.o.Delays.Replace, func() {
		launch := wasUp
		switch m.habits.AfterUpdate {
		case UpdateStarted:
			launch = true
		case UpdateStopped:
			launch = false
		}
		if skipLaunch || !launch {
			s.setLocked(m, "stopped")
			return
		}
		s.launchLocked(m, false)
	})
}

// wait serves GET .../wait: it runs without the lock held and re-checks
// on every state change.
func (s *Server) wait(w http.ResponseWriter, r *http.Request, m *machine, since uint64) {
	q := r.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "started"
	}
	switch state {
	case "started", "stopped", "suspended", "destroyed":
	default:
		writeError(w, http.StatusBadRequest, "invalid state %q", state)
		return
	}
	inst := q.Get("instance_id")
	if state == "stopped" && inst == "" {
		writeError(w, http.StatusBadRequest, "instance_id is required to wait for stopped")
		return
	}
	secs := 60
	if v := q.Get("timeout"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 60 {
			writeError(w, http.StatusBadRequest, "timeout must be 1-60 seconds, got %q", v)
			return
		}
		secs = n
	}
	t := time.NewTimer(time.Duration(secs) * time.Second)
	defer t.Stop()
	s.mu.Lock()
	crash := m.habits.CrashStatus
	if crash == 0 {
		crash = http.StatusPreconditionFailed
	}
	s.mu.Unlock()
	for {
		s.mu.Lock()
		reached := m.state == state && (inst == "" || inst == m.instance) || m.visitedSince(since, state, inst)
		replaced := inst != "" && strings.Contains(m.replaced+" ", " "+inst+" ")
		crashed := state == "started" && m.crashed && (inst == "" || inst == m.instance)
		cur := m.state
		ch := s.changed
		s.mu.Unlock()
		switch {
		case reached:
			writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
			return
		case replaced:
			writeError(w, http.StatusPreconditionFailed, "machine %s instance %s is currently replaced", m.id, inst)
			return
		case crashed:
			writeError(w, crash, "machine failed to reach desired state, current state: %s", cur)
			return
		}
		select {
		case <-ch:
		case <-t.C:
			writeError(w, http.StatusRequestTimeout, "deadline_exceeded: machine did not reach state %s in %ds", state, secs)
			return
		case <-r.Context().Done():
			return
		case <-s.done:
			writeError(w, http.StatusServiceUnavailable, "shutting down")
			return
		}
	}
}

func (s *Server) takeLease(w http.ResponseWriter, r *http.Request, m *machine) {
	var in struct {
		Description string `json:"description"`
		TTL         int    `json:"ttl"`
	}
	if err := decodeOptional(r, &in); err != nil {
		writeError(w, http.StatusBadRequest, "bad lease body: %v", err)
		return
	}
	now := time.Now()
	l := m.activeLease(now)
	nonce := r.Header.Get(nonceHeader)
	switch {
	case l != nil && nonce != l.nonce:
		leaseConflict(w, m, l)
		return
	case l == nil && nonce != "":
		writeError(w, http.StatusConflict, "lease not found")
		return
	}
	if in.TTL <= 0 {
		in.TTL = 30
	}
	if nonce == "" {
		nonce = newNonce()
	}
	m.lease = &lease{nonce: nonce, owner: "gateway@example.test", description: in.Description,
		expires: now.Add(time.Duration(in.TTL) * time.Second)}
	writeJSON(w, http.StatusCreated, leaseJSON(m.lease, m.instance))
}

func leaseJSON(l *lease, version string) map[string]any {
	return map[string]any{"status": "success", "data": map[string]any{
		"nonce": l.nonce, "expires_at": l.expires.Unix(), "owner": l.owner, "description": l.description, "version": version}}
}

func (s *Server) getLease(w http.ResponseWriter, _ *http.Request, m *machine) {
	l := m.activeLease(time.Now())
	if l == nil {
		writeError(w, http.StatusNotFound, "lease not found")
		return
	}
	// The reference's example answer carries the nonce: any client with
	// the app's token may read it.
	writeJSON(w, http.StatusOK, leaseJSON(l, m.instance))
}

func (s *Server) releaseLease(w http.ResponseWriter, r *http.Request, m *machine) {
	l := m.activeLease(time.Now())
	if l == nil || r.Header.Get(nonceHeader) != l.nonce {
		writeError(w, http.StatusNotFound, "lease not found")
		return
	}
	m.lease = nil
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

func (s *Server) metadata(w http.ResponseWriter, _ *http.Request, m *machine) {
	out := map[string]string{}
	if md, ok := m.config["metadata"].(map[string]any); ok {
		for k, v := range md {
			if sv, ok := v.(string); ok {
				out[k] = sv
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) exec(w http.ResponseWriter, r *http.Request, m *machine) {
	var in struct {
		Cmd string `json:"cmd"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Cmd == "" {
		writeError(w, http.StatusBadRequest, "cmd is required")
		return
	}
	if m.state != "started" {
		writeError(w, http.StatusPreconditionFailed, "machine is not started (state %s)", m.state)
		return
	}
	v := m.view(time.Now())
	out, code := "", 0
	if s.o.Exec != nil {
		out, code = s.o.Exec(v, in.Cmd)
	} else {
		out = imageTag(v.Image) + "\n"
	}
	writeJSON(w, http.StatusOK, map[string]any{"exit_code": code, "stdout": out, "stderr": ""})
}

// imageTag returns the tag of an image reference ("latest" when none).
func imageTag(image string) string {
	i := strings.LastIndexByte(image, ':')
	if i < 0 || strings.Contains(image[i:], "/") {
		return "latest"
	}
	return image[i+1:]
}

// decodeOptional decodes a JSON body that may be empty.
func decodeOptional(r *http.Request, v any) error {
	b, err := io.ReadAll(r.Body)
	if err != nil || len(bytes.TrimSpace(b)) == 0 {
		return err
	}
	return json.Unmarshal(b, v)
}

// discard is a ResponseWriter whose answer is lost.
type discard struct{ header http.Header }

func (d discard) Header() http.Header         { return d.header }
func (d discard) Write(b []byte) (int, error) { return len(b), nil }
func (d discard) WriteHeader(int)             {}

// recorder keeps the status a handler wrote.
type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}
