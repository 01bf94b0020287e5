package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
)

const admToken = "adm-test-token-0123456789"

// admGateway is an in-process gateway with its admin listener on.
type admGateway struct {
	*e2eGateway
	admin  string // http://host:port of the admin listener
	host   string // host:port of the admin listener
	client *http.Client
}

// admStart starts a gateway whose admin listener accepts admToken, with
// extra YAML (homes, apps, wake) and admin settings in adminExtra (lines
// under admin:, indented by four spaces).
func admStart(t *testing.T, extra, adminExtra string) *admGateway {
	t.Helper()
	return admServe(t, e2eStartInProcess(t, admConfig(extra, adminExtra)))
}

// admConfig is extra with an admin listener that accepts admToken.
func admConfig(extra, adminExtra string) string {
	return fmt.Sprintf("admin:\n  listen: \"127.0.0.1:0\"\n  tokens: [%q]\n%s%s", admToken, adminExtra, extra)
}

// admServe waits for gw's admin listener.
func admServe(t *testing.T, gw *e2eGateway) *admGateway {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testbin.WaitLimit)
	defer cancel()
	a, err := gw.g.AdminAddr(ctx)
	if err != nil {
		t.Fatalf("admin listener: %v", err)
	}
	return &admGateway{e2eGateway: gw, admin: "http://" + a.String(), host: a.String(), client: e2eClient(t)}
}

// do sends an admin request with token (none when ""), extra headers and a
// JSON body (nil for none), and returns the status, headers and body.
func (a *admGateway) do(t testing.TB, method, path, token string, hdr map[string]string, body any) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, a.admin+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	res, err := a.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, path, err)
	}
	return res.StatusCode, res.Header, b
}

// admErr is the admin API's error body.
type admErr struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Field   string `json:"field"`
		Fields  []struct {
			Field   string `json:"field"`
			Message string `json:"message"`
		} `json:"fields"`
	} `json:"error"`
}

func admDecode[T any](t testing.TB, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

// admRoutes is every admin route, with a path that names real records.
var admRoutes = []struct{ method, path string }{
	{"GET", "/metrics"},
	{"GET", "/admin/status"},
	{"GET", "/admin/openapi.json"},
	{"GET", "/admin/homes/demo/logs"},
	{"GET", "/admin/homes"},
	{"GET", "/admin/homes/demo"},
	{"PUT", "/admin/homes/demo"},
	{"DELETE", "/admin/homes/demo"},
	{"POST", "/admin/homes/demo/wake"},
	{"POST", "/admin/homes/demo/suspend"},
	{"POST", "/admin/homes/demo/roll"},
	{"POST", "/admin/homes/demo/refresh"},
	{"POST", "/admin/homes/demo/leases"},
	{"DELETE", "/admin/homes/demo/leases/1"},
	{"GET", "/admin/target"},
	{"PUT", "/admin/target"},
	{"GET", "/admin/apps"},
	{"GET", "/admin/apps/demo"},
	{"PUT", "/admin/apps/demo"},
	{"DELETE", "/admin/apps/demo"},
	{"POST", "/admin/apps/demo/refresh"},
	{"GET", "/admin/routes"},
	{"GET", "/admin/events"},
	{"GET", "/admin/no-such-route"},
}

const admDemo = `
wake:
  idle_timeout: 0s
homes:
  - id: demo
apps:
  - slug: demo
    home: demo
    path: /apps/demo
    strip_prefix: true
`

// TestAdminEveryRouteNeedsToken checks every admin route answers 401
// without a token and with a wrong one (before anything else happens), and
// is not 401 with the right one.
func TestAdminEveryRouteNeedsToken(t *testing.T) {
	t.Parallel()
	a := admStart(t, admDemo, "  auth_failures_per_minute: 1000\n")
	for _, rt := range admRoutes {
		for _, tok := range []string{"", "wrong-token-0123456789"} {
			code, hdr, body := a.do(t, rt.method, rt.path, tok, nil, nil)
			if code != http.StatusUnauthorized {
				t.Errorf("%s %s with token %q: %d %s, want 401", rt.method, rt.path, tok, code, body)
				continue
			}
			if e := admDecode[admErr](t, body); e.Error.Code != "unauthorized" || e.Error.Field != "Authorization" {
				t.Errorf("%s %s: error body %s", rt.method, rt.path, body)
			}
			if !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s %s: WWW-Authenticate %q", rt.method, rt.path, hdr.Get("WWW-Authenticate"))
			}
		}
	}
	// With the token, nothing is 401 (the event stream is read elsewhere;
	// removing the home is refused: an app runs in it).
	for _, rt := range admRoutes {
		if rt.path == "/admin/events" {
			continue
		}
		code, _, body := a.do(t, rt.method, rt.path, admToken, nil, nil)
		if code == http.StatusUnauthorized || code == http.StatusForbidden {
			t.Errorf("%s %s with the token: %d %s", rt.method, rt.path, code, body)
		}
	}
	// The dashboard's page and assets load without a token.
	for _, p := range []string{"/", "/assets/dashboard.js", "/assets/dashboard.css"} {
		if code, _, body := a.do(t, "GET", p, "", nil, nil); code != http.StatusOK {
			t.Errorf("GET %s without token: %d %s", p, code, body)
		}
	}
}

// TestAdminFailedTokensRateLimited checks a client that keeps failing gets
// 429 with Retry-After for its next wrong token, the right token still
// passes from the same address, and the metric moves.
func TestAdminFailedTokensRateLimited(t *testing.T) {
	t.Parallel()
	a := admStart(t, admDemo, "  auth_failures_per_minute: 3\n")
	for i := range 3 {
		if code, _, body := a.do(t, "GET", "/admin/status", "bad-token-0123456789", nil, nil); code != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d %s, want 401", i+1, code, body)
		}
	}
	code, hdr, body := a.do(t, "GET", "/admin/status", "bad-token-0123456789", nil, nil)
	if code != http.StatusTooManyRequests {
		t.Fatalf("after 3 failures, a wrong token: %d %s, want 429", code, body)
	}
	if n, err := strconv.Atoi(hdr.Get("Retry-After")); err != nil || n < 1 {
		t.Errorf("Retry-After %q", hdr.Get("Retry-After"))
	}
	if code, _, body := a.do(t, "GET", "/admin/status", admToken, nil, nil); code != http.StatusOK {
		t.Fatalf("after 3 failures, the right token: %d %s, want 200", code, body)
	}
}

// TestAdminNotOnPublicListener checks no admin path, /metrics or the
// dashboard is served on the public listener, with or without a token.
func TestAdminNotOnPublicListener(t *testing.T) {
	t.Parallel()
	a := admStart(t, admDemo, "")
	paths := []string{"/", "/assets/dashboard.js", "/admin", "/admin/"}
	for _, rt := range admRoutes {
		paths = append(paths, rt.path)
	}
	for _, p := range paths {
		for _, m := range []string{"GET", "POST", "PUT", "DELETE"} {
			req, _ := http.NewRequest(m, "http://"+a.addr+p, nil)
			req.Header.Set("Authorization", "Bearer "+admToken)
			res, err := a.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if p == "/" && m == "GET" {
				// The public root is the gateway's own small page, never the
				// dashboard.
				if res.StatusCode != http.StatusOK || strings.Contains(string(body), "dashboard.js") {
					t.Errorf("public GET /: %d %s; want the public root page", res.StatusCode, body)
				}
				continue
			}
			if res.StatusCode != http.StatusNotFound && (m == "GET" || res.StatusCode != http.StatusMethodNotAllowed) {
				t.Errorf("public %s %s: %d %s, want 404", m, p, res.StatusCode, body)
			}
		}
	}
}

// TestAdminRefusesCrossSiteAndRebinding checks requests from other origins
// and requests naming another host (DNS rebinding) are refused with 403,
// token or not, and that the listener's own names are answered.
func TestAdminRefusesCrossSiteAndRebinding(t *testing.T) {
	t.Parallel()
	a := admStart(t, admDemo, "")
	_, port, _ := strings.Cut(a.host, ":")
	refused := []map[string]string{
		{"Origin": "http://evil.example"},
		{"Origin": "null"},
		{"Origin": "http://localhost:3000"},
		{"Sec-Fetch-Site": "cross-site"},
		{"Host": "evil.example:" + port},
		{"Host": "evil.example"},
		{"Host": "127.0.0.1:1"},
	}
	for _, p := range []string{"/admin/status", "/", "/metrics"} {
		for _, h := range refused {
			code, _, body := a.do(t, "GET", p, admToken, h, nil)
			if code != http.StatusForbidden {
				t.Errorf("GET %s with %v: %d %s, want 403", p, h, code, body)
			}
		}
	}
	code, _, body := a.do(t, "POST", "/admin/homes/demo/suspend", admToken, map[string]string{"Origin": "http://evil.example"}, nil)
	if code != http.StatusForbidden || admDecode[admErr](t, body).Error.Field != "Origin" {
		t.Errorf("cross-site POST: %d %s", code, body)
	}
	for _, h := range []map[string]string{
		nil,
		{"Host": "localhost:" + port},
		{"Origin": "http://" + a.host, "Sec-Fetch-Site": "same-origin"},
	} {
		if code, _, body := a.do(t, "GET", "/admin/status", admToken, h, nil); code != http.StatusOK {
			t.Errorf("GET /admin/status with %v: %d %s, want 200", h, code, body)
		}
	}
}

// admHome is the part of a home view the tests read.
type admHome struct {
	ID                string     `json:"id"`
	Target            string     `json:"target"`
	Status            string     `json:"status"`
	Version           string     `json:"version"`
	Sessions          int        `json:"sessions"`
	Endpoint          string     `json:"endpoint"`
	Generation        uint64     `json:"generation"`
	LastWakeAt        *time.Time `json:"last_wake_at"`
	LastWakeLatencyMS float64    `json:"last_wake_latency_ms"`
	RelayToken        bool       `json:"relay_token"`
}

// TestAdminHomes registers a home at runtime, serves it, checks
// validation, If-Match, wake, suspend, leases and removal.
func TestAdminHomes(t *testing.T) {
	t.Parallel()
	a := admStart(t, admDemo, "")
	secret := filepath.Join(t.TempDir(), "relay")
	if err := os.WriteFile(secret, []byte("relay-secret-for-bob\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Run("ValidationNamesEveryField", func(t *testing.T) { admHomeValidation(t, a) })
	t.Run("RegisterServeRemove", func(t *testing.T) { admHomeRegisterServeRemove(t, a, secret) })
	t.Run("WakeAndSuspend", func(t *testing.T) { admHomeWakeAndSuspend(t, a) })
}

// admHomeValidation checks a bad home names every bad field, and a bad
// lease its ttl.
func admHomeValidation(t *testing.T, a *admGateway) {
	code, _, body := a.do(t, "PUT", "/admin/homes/Bad_ID", admToken, nil, map[string]any{
		"target": "Not A Target", "provider": "teleport", "probe": "smoke",
		"idle_timeout": "-1s", "relay_token": "env:ADM_UNSET_VARIABLE"})
	if code != http.StatusBadRequest {
		t.Fatalf("bad home: %d %s", code, body)
	}
	e := admDecode[admErr](t, body)
	got := map[string]bool{}
	for _, f := range e.Error.Fields {
		got[f.Field] = true
	}
	for _, f := range []string{"id", "target", "provider", "probe", "idle_timeout", "relay_token"} {
		if !got[f] || !strings.Contains(e.Error.Field, f) || !strings.Contains(e.Error.Message, f+":") {
			t.Errorf("field %s not named: %s", f, body)
		}
	}
	code, _, body = a.do(t, "PUT", "/admin/homes/ok", admToken, nil, map[string]any{"colour": "blue"})
	if e := admDecode[admErr](t, body); code != http.StatusBadRequest || e.Error.Field != "colour" {
		t.Errorf("unknown field: %d %s", code, body)
	}
	code, _, body = a.do(t, "PUT", "/admin/homes/ok", admToken, nil, map[string]any{"target": "demo"})
	if e := admDecode[admErr](t, body); code != http.StatusConflict || e.Error.Code != "target_taken" || e.Error.Field != "target" {
		t.Errorf("taken target: %d %s", code, body)
	}
	code, _, body = a.do(t, "POST", "/admin/homes/demo/leases", admToken, nil, map[string]any{"ttl": "forever"})
	if e := admDecode[admErr](t, body); code != http.StatusBadRequest || e.Error.Field != "ttl" {
		t.Errorf("bad ttl: %d %s", code, body)
	}
}

// admHomeRegisterServeRemove registers a home with a relay token, serves
// it, refuses stale If-Match, moves its route, holds it with a lease and
// removes it.
func admHomeRegisterServeRemove(t *testing.T, a *admGateway, secret string) {
	code, hdr, body := a.do(t, "PUT", "/admin/homes/bob", admToken, nil, map[string]any{
		"target": "bob", "relay_token": "file:" + secret, "idle_timeout": "0s"})
	if code != http.StatusCreated {
		t.Fatalf("register: %d %s", code, body)
	}
	h := admDecode[admHome](t, body)
	if h.ID != "bob" || h.Status != "sleeping" || !h.RelayToken || hdr.Get("ETag") != strconv.Quote(strconv.FormatUint(h.Generation, 10)) {
		t.Fatalf("registered home: %s (ETag %s)", body, hdr.Get("ETag"))
	}
	if strings.Contains(string(body), "relay-secret-for-bob") {
		t.Fatalf("the relay token leaked: %s", body)
	}
	_, w, _ := e2eGetWhoami(t, a.client, "http://"+a.addr+"/node/bob/whoami", nil)
	// The home saw its relay token (masked on the way back out).
	if got := w.Headers.Get("X-Wakegate-Relay"); got == "" || strings.Contains(got, "relay-secret") {
		t.Errorf("the runtime home's relay header, as echoed: %q", got)
	}
	code, _, body = a.do(t, "GET", "/admin/homes/bob", admToken, nil, nil)
	h = admDecode[admHome](t, body)
	if code != http.StatusOK || h.Status != "running" || h.LastWakeAt == nil || h.Endpoint == "" {
		t.Fatalf("after a request: %d %s", code, body)
	}

	// A stale generation is refused, for replace and for removal.
	stale := strconv.FormatUint(h.Generation-1, 10)
	code, _, body = a.do(t, "PUT", "/admin/homes/bob", admToken, map[string]string{"If-Match": `"` + stale + `"`},
		map[string]any{"target": "bobby"})
	if e := admDecode[admErr](t, body); code != http.StatusConflict || e.Error.Field != "If-Match" {
		t.Fatalf("stale PUT: %d %s", code, body)
	}
	code, _, body = a.do(t, "DELETE", "/admin/homes/bob", admToken, map[string]string{"If-Match": stale}, nil)
	if code != http.StatusConflict {
		t.Fatalf("stale DELETE: %d %s", code, body)
	}
	// The current generation moves the route.
	code, _, body = a.do(t, "PUT", "/admin/homes/bob", admToken, map[string]string{"If-Match": strconv.FormatUint(h.Generation, 10)},
		map[string]any{"target": "bobby", "relay_token": "file:" + secret, "idle_timeout": "0s"})
	if code != http.StatusOK || admDecode[admHome](t, body).Target != "bobby" {
		t.Fatalf("replace: %d %s", code, body)
	}
	if res, body := e2eGet(t, a.client, "http://"+a.addr+"/node/bob/whoami", nil); res.StatusCode != http.StatusNotFound {
		t.Errorf("old target after replace: %d %s", res.StatusCode, body)
	}
	e2eGetWhoami(t, a.client, "http://"+a.addr+"/node/bobby/whoami", nil)

	// A lease is a session: removal is refused while it lives.
	code, _, body = a.do(t, "POST", "/admin/homes/bob/leases", admToken, nil, map[string]any{"ttl": "1m"})
	if code != http.StatusCreated {
		t.Fatalf("lease: %d %s", code, body)
	}
	lease := admDecode[struct {
		Lease string `json:"lease"`
	}](t, body).Lease
	if n := a.g.Sessions().Count("bob"); n != 1 {
		t.Fatalf("sessions with a lease: %d", n)
	}
	if code, _, body = a.do(t, "DELETE", "/admin/homes/bob", admToken, nil, nil); code != http.StatusConflict {
		t.Fatalf("DELETE with a lease: %d %s", code, body)
	}
	if code, _, body = a.do(t, "DELETE", "/admin/homes/bob/leases/"+lease, admToken, nil, nil); code != http.StatusNoContent {
		t.Fatalf("end lease: %d %s", code, body)
	}
	if code, _, _ = a.do(t, "DELETE", "/admin/homes/bob/leases/"+lease, admToken, nil, nil); code != http.StatusNotFound {
		t.Errorf("ending a lease twice: %d", code)
	}
	if code, _, body = a.do(t, "DELETE", "/admin/homes/bob", admToken, nil, nil); code != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", code, body)
	}
	if res, body := e2eGet(t, a.client, "http://"+a.addr+"/node/bobby/whoami", nil); res.StatusCode != http.StatusNotFound {
		t.Errorf("removed home still routed: %d %s", res.StatusCode, body)
	}
	if code, _, _ = a.do(t, "GET", "/admin/homes/bob", admToken, nil, nil); code != http.StatusNotFound {
		t.Errorf("removed home still listed: %d", code)
	}
	if len(testbin.HomePIDs(t, filepath.Join(a.data, "homes", "bob"))) != 0 {
		t.Errorf("the removed home's process still runs")
	}
}

// admHomeWakeAndSuspend wakes and suspends a config home and checks a
// home an app runs in cannot be removed.
func admHomeWakeAndSuspend(t *testing.T, a *admGateway) {
	code, _, body := a.do(t, "POST", "/admin/homes/demo/wake", admToken, nil, nil)
	if h := admDecode[admHome](t, body); code != http.StatusOK || h.Status != "running" || h.LastWakeAt == nil {
		t.Fatalf("wake: %d %s", code, body)
	}
	code, _, body = a.do(t, "POST", "/admin/homes/demo/suspend", admToken, nil, nil)
	if h := admDecode[admHome](t, body); code != http.StatusOK || h.Status != "suspended" {
		t.Fatalf("suspend: %d %s", code, body)
	}
	if code, _, _ = a.do(t, "POST", "/admin/homes/nobody/wake", admToken, nil, nil); code != http.StatusNotFound {
		t.Errorf("wake of an unknown home: %d", code)
	}
	// An app runs in demo: it cannot be removed.
	if code, _, body = a.do(t, "DELETE", "/admin/homes/demo", admToken, nil, nil); code != http.StatusConflict {
		t.Errorf("removing a home with an app: %d %s", code, body)
	}
}

// admEvent is one Server-Sent Event.
type admEvent struct {
	id, typ string
	data    map[string]any
}

// admReadEvent reads the next event (skipping comments) from an SSE stream.
func admReadEvent(t testing.TB, br *bufio.Reader) admEvent {
	t.Helper()
	var ev admEvent
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("event stream: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if ev.typ != "" {
				return ev
			}
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			ev.typ = line[7:]
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(line[6:]), &ev.data); err != nil {
				t.Fatalf("event data %q: %v", line, err)
			}
		}
	}
}

// admOpenEvents connects to the event stream, with lastID as Last-Event-ID
// when not empty. The stream closes when the test ends.
func (a *admGateway) openEvents(t *testing.T, lastID string) *bufio.Reader {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", a.admin+"/admin/events", nil)
	req.Header.Set("Authorization", "Bearer "+admToken)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	res, err := a.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("events: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	return bufio.NewReader(res.Body)
}

// TestAdminEventStream checks a connected client receives a wake's start
// and ready, in order, as they happen, and that Last-Event-ID replays what
// followed.
func TestAdminEventStream(t *testing.T) {
	t.Parallel()
	a := admStart(t, admDemo, "")
	br := a.openEvents(t, "")
	// Remembered events (app phases) come first; the stream is live once
	// its opening comment arrived.
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("stream start: %v", err)
		}
		if line == ": stream open\n" {
			break
		}
		if strings.HasPrefix(line, "event: wake.") {
			t.Fatalf("a wake event before any wake: %q", line)
		}
	}
	// Events of this home's wake only (apps publish their phases too).
	next := func(br *bufio.Reader) admEvent {
		for {
			if ev := admReadEvent(t, br); strings.HasPrefix(ev.typ, "wake.") {
				return ev
			}
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = e2eClient(t).Get("http://" + a.addr + "/node/demo/whoami")
	}()
	start := next(br)
	if start.typ != "wake.start" || start.data["home"] != "demo" || start.data["cause"] != "cold" {
		t.Fatalf("first event: %+v", start)
	}
	ready := next(br)
	if ready.typ != "wake.ready" || ready.data["home"] != "demo" || ready.data["total_ms"] == nil {
		t.Fatalf("second event: %+v", ready)
	}
	if s, r := admID(t, start.id), admID(t, ready.id); r <= s {
		t.Errorf("ids out of order: %d then %d", s, r)
	}
	<-done
	// Reconnecting after the start replays the ready, then goes live.
	br2 := a.openEvents(t, start.id)
	if again := next(br2); again.typ != "wake.ready" || again.id != ready.id {
		t.Fatalf("replay after %s: %+v", start.id, again)
	}
}

func admID(t testing.TB, s string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("event id %q: %v", s, err)
	}
	return n
}

// TestAdminAppsAndRoutes checks the app status and route table routes.
func TestAdminAppsAndRoutes(t *testing.T) {
	t.Parallel()
	a := admStart(t, admDemo, "")
	code, _, body := a.do(t, "GET", "/admin/apps/demo", admToken, nil, nil)
	app := admDecode[struct{ Slug, Kind, Home, Phase, Reason, Message, Route string }](t, body)
	if code != http.StatusOK || app.Slug != "demo" || app.Home != "demo" || app.Phase == "" || app.Route == "" {
		t.Fatalf("app: %d %s", code, body)
	}
	code, _, body = a.do(t, "POST", "/admin/apps/demo/refresh?wait=sometime", admToken, nil, nil)
	if e := admDecode[admErr](t, body); code != http.StatusBadRequest || e.Error.Field != "wait" {
		t.Errorf("bad wait: %d %s", code, body)
	}
	if code, _, body = a.do(t, "POST", "/admin/apps/nope/refresh", admToken, nil, nil); code != http.StatusNotFound {
		t.Errorf("refresh of an unknown app: %d %s", code, body)
	}
	code, _, body = a.do(t, "GET", "/admin/routes", admToken, nil, nil)
	routes := admDecode[struct {
		Routes []struct{ Slug, State string }
	}](t, body)
	if code != http.StatusOK || len(routes.Routes) != 1 || routes.Routes[0].Slug != "demo" {
		t.Errorf("routes: %d %s", code, body)
	}
	// Once the app started (ready), its self-probe has published its route, and
	// the table says so.
	if code, _, body = a.do(t, "POST", "/admin/apps/demo/start", admToken, nil, nil); code != http.StatusOK {
		t.Fatalf("start: %d %s", code, body)
	}
	code, _, body = a.do(t, "GET", "/admin/routes", admToken, nil, nil)
	routes = admDecode[struct {
		Routes []struct{ Slug, State string }
	}](t, body)
	if code != http.StatusOK || len(routes.Routes) != 1 || routes.Routes[0].State != "published" {
		t.Errorf("routes once ready: %d %s", code, body)
	}
}

// TestAdminTarget checks the roll target routes: none, set, stale
// If-Match, validation.
func TestAdminTarget(t *testing.T) {
	t.Parallel()
	a := admStart(t, admDemo, "")
	if code, _, body := a.do(t, "GET", "/admin/target", admToken, nil, nil); code != http.StatusNotFound {
		t.Fatalf("no target: %d %s", code, body)
	}
	code, _, body := a.do(t, "PUT", "/admin/target", admToken, nil, map[string]any{"version": ""})
	if e := admDecode[admErr](t, body); code != http.StatusBadRequest || e.Error.Field != "version" {
		t.Fatalf("empty version: %d %s", code, body)
	}
	code, hdr, body := a.do(t, "PUT", "/admin/target", admToken, nil, map[string]any{"version": "2"})
	if code != http.StatusOK {
		t.Fatalf("set target: %d %s", code, body)
	}
	etag := hdr.Get("ETag")
	code, _, body = a.do(t, "PUT", "/admin/target", admToken, map[string]string{"If-Match": etag}, map[string]any{"version": "3"})
	if code != http.StatusOK {
		t.Fatalf("set target with If-Match: %d %s", code, body)
	}
	code, _, body = a.do(t, "PUT", "/admin/target", admToken, map[string]string{"If-Match": etag}, map[string]any{"version": "4"})
	if code != http.StatusConflict {
		t.Fatalf("stale If-Match: %d %s", code, body)
	}
	code, _, body = a.do(t, "GET", "/admin/target", admToken, nil, nil)
	if code != http.StatusOK || admDecode[struct{ Version string }](t, body).Version != "3" {
		t.Errorf("target: %d %s", code, body)
	}
	// The roll action moves the idle home onto the target; a second roll
	// has nothing to do and says so.
	code, _, body = a.do(t, "POST", "/admin/homes/demo/roll", admToken, nil, nil)
	if code != http.StatusOK || admDecode[struct{ Version string }](t, body).Version != "3" {
		t.Fatalf("roll: %d %s", code, body)
	}
	code, _, body = a.do(t, "POST", "/admin/homes/demo/roll", admToken, nil, nil)
	if e := admDecode[admErr](t, body); code != http.StatusConflict || e.Error.Code != "roll_not_needed" {
		t.Fatalf("second roll: %d %s", code, body)
	}
}

// TestAdminStatusCLI runs the real binary with its admin listener and
// checks `wakegate status --json` prints what the API answers, the table
// names the home, `home wake` and `app refresh --wait ready` work, and
// usage errors exit 2.
func TestAdminStatusCLI(t *testing.T) {
	t.Parallel()
	adminAddr := fmt.Sprintf("127.0.0.1:%d", testbin.FreePort(t))
	testbin.ServeEnv(t, t.TempDir(), []string{"ADM_CLI_TOKEN=" + admToken}, fmt.Sprintf(`
listen: "%%ADDR%%"
data_dir: "%%DATA%%"
instance: adm-cli
log: {access: false}
admin:
  listen: %q
  tokens: ["env:ADM_CLI_TOKEN"]
`, adminAddr)+admDemo)
	run := func(env []string, args ...string) (int, string, string) {
		t.Helper()
		return admRunCLI(t, env, args...)
	}
	env := []string{"WAKEGATE_ADMIN=" + adminAddr, "WAKEGATE_TOKEN=" + admToken}

	code, out, errs := run(env, "status", "--json")
	if code != 0 {
		t.Fatalf("status --json: exit %d\n%s%s", code, out, errs)
	}
	req, _ := http.NewRequest("GET", "http://"+adminAddr+"/admin/status?full=true", nil)
	req.Header.Set("Authorization", "Bearer "+admToken)
	res, err := e2eClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	api, _ := io.ReadAll(res.Body)
	res.Body.Close()
	cli := admDecode[map[string]any](t, []byte(out))
	want := admDecode[map[string]any](t, api)
	if cli["uptime_s"] == nil || want["homes"] == nil || want["apps"] == nil {
		t.Fatalf("status lacks uptime, homes or apps:\n%s", out)
	}
	delete(cli, "uptime_s")
	delete(want, "uptime_s")
	if c, w := admCanon(t, cli), admCanon(t, want); c != w {
		t.Errorf("status --json differs from the API:\ncli: %s\napi: %s", c, w)
	}

	code, out, errs = run(env, "status")
	if code != 0 || !strings.Contains(out, "demo") || !strings.Contains(out, "healthy") || !strings.Contains(out, "HOME") {
		t.Errorf("status: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = run(env, "home", "wake", "demo")
	if code != 0 || !strings.Contains(out, "running") {
		t.Fatalf("home wake: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = run(env, "app", "refresh", "demo", "--wait", "ready")
	if code != 0 || !strings.Contains(out, `"phase": "ready"`) {
		t.Errorf("app refresh --wait ready: exit %d\n%s%s", code, out, errs)
	}
	for _, bad := range [][]string{{"home", "jump", "demo"}, {"home", "wake"}, {"app", "refresh"}, {"status", "extra"}, {"status", "--nope"}} {
		if code, out, errs = run(env, bad...); code != 2 {
			t.Errorf("%v: exit %d, want 2\n%s%s", bad, code, out, errs)
		}
	}
	if code, _, errs = run([]string{"WAKEGATE_ADMIN=" + adminAddr, "WAKEGATE_TOKEN="}, "status"); code != 2 || !strings.Contains(errs, "token") {
		t.Errorf("no token: exit %d %s", code, errs)
	}
	if code, _, errs = run([]string{"WAKEGATE_ADMIN=" + adminAddr, "WAKEGATE_TOKEN=wrong-token-0123456789"}, "status"); code != 3 || !strings.Contains(errs, "401") {
		t.Errorf("wrong token: exit %d %s", code, errs)
	}
}

// admRunCLI runs the real binary with args and env added to the
// environment, and returns its exit status, stdout and stderr.
func admRunCLI(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(testbin.Build(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

// admCanon re-encodes v with sorted keys.
func admCanon(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
