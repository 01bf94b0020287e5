package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/internal/testbin"
)

// admDetailConfig is a home with a relay token from a file and an app in
// it.
func admDetailConfig(secret string) string {
	return `
wake:
  idle_timeout: 0s
homes:
  - id: demo
    relay_token: file:` + secret + `
apps:
  - slug: demo
    home: demo
    path: /apps/demo
    strip_prefix: true
`
}

// TestAdminHomeDetail wakes a real home and reads its detail: the wake
// with its phase timings, sessions by kind while a WebSocket, a request
// and a lease are open, the verdict age, the roll state against a target,
// and the app's phase history.
func TestAdminHomeDetail(t *testing.T) {
	t.Parallel()
	token := "relay-detail-" + time.Now().Format("150405.000000") + "-secret"
	secret := filepath.Join(t.TempDir(), "relay")
	if err := os.WriteFile(secret, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := admStart(t, admDetailConfig(secret), "")
	get := func() admin.HomeView {
		t.Helper()
		code, _, body := a.do(t, "GET", "/admin/homes/demo", admToken, nil, nil)
		if code != http.StatusOK {
			t.Fatalf("detail: %d %s", code, body)
		}
		return admDecode[admin.HomeView](t, body)
	}
	v := get()
	if len(v.Wakes) != 0 || v.SessionKinds == nil || v.Roll == nil || v.Roll.State != admin.RollNoTarget || v.VerdictAgeS != nil {
		t.Fatalf("detail before any wake: %+v", v)
	}
	if code, _, body := a.do(t, "POST", "/admin/homes/demo/wake", admToken, nil, nil); code != http.StatusOK {
		t.Fatalf("wake: %d %s", code, body)
	}
	v = get()
	if len(v.Wakes) != 1 {
		t.Fatalf("wakes after one wake: %+v", v.Wakes)
	}
	w := v.Wakes[0]
	if w.Outcome != "ready" || w.Cause != "admin" || w.TotalMS <= 0 || w.ProviderMS <= 0 || w.ProbeAttempts < 1 ||
		w.ProviderMS+w.ProbeMS > w.TotalMS || w.StopProven != nil || w.At.IsZero() {
		t.Errorf("wake record %+v: want a ready admin wake with its phase timings", w)
	}
	if v.VerdictAgeS == nil || *v.VerdictAgeS < 0 {
		t.Errorf("verdict age %v after a wake", v.VerdictAgeS)
	}

	// Sessions by kind: one WebSocket, one request in flight, one lease.
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+a.addr+"/node/demo/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	e2eHello(t, ws, "demo")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	slow := make(chan struct{})
	go func() {
		defer close(slow)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+a.addr+"/node/demo/slow?d=1h", nil)
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
		}
	}()
	if code, _, body := a.do(t, "POST", "/admin/homes/demo/leases", admToken, nil, map[string]string{"ttl": "10m"}); code != http.StatusCreated {
		t.Fatalf("lease: %d %s", code, body)
	}
	testbin.Eventually(t, "one request, one WebSocket and one lease", func() bool {
		k := get().SessionKinds
		return k.Requests == 1 && k.WebSockets == 1 && len(k.Leases) == 1
	})
	if l := get().SessionKinds.Leases[0]; time.Until(l.ExpiresAt) <= 0 || time.Until(l.ExpiresAt) > 10*time.Minute || l.Lease == "" {
		t.Errorf("lease %+v: want its id and an expiry within 10m", l)
	}
	cancel()
	<-slow
	ws.Close()
	testbin.Eventually(t, "no request and no WebSocket", func() bool {
		k := get().SessionKinds
		return k.Requests == 0 && k.WebSockets == 0
	})

	// Roll state: a target of another version is pending for an idle home.
	if code, _, body := a.do(t, "PUT", "/admin/target", admToken, nil, map[string]string{"version": "2"}); code != http.StatusOK && code != http.StatusCreated {
		t.Fatalf("target: %d %s", code, body)
	}
	if r := get().Roll; r.State != admin.RollPending || r.TargetVersion != "2" {
		t.Errorf("roll %+v: want pending onto 2", r)
	}

	// App detail: the phase history with reasons, and the route state.
	if code, _, body := a.do(t, "POST", "/admin/apps/demo/refresh?wait=ready", admToken, nil, nil); code != http.StatusOK {
		t.Fatalf("refresh: %d %s", code, body)
	}
	code, _, body := a.do(t, "GET", "/admin/apps/demo", admToken, nil, nil)
	app := admDecode[admin.AppView](t, body)
	if code != http.StatusOK || len(app.Phases) == 0 || app.Phases[0].Phase != "ready" || app.Phases[0].Reason == "" || app.Route != "published" {
		t.Fatalf("app detail: %d %s", code, body)
	}
	// Its check schedule: at least the refresh's check was sent, and the
	// next one is due one pause after the last.
	if c := app.Checks; c == nil || c.Sent == 0 || c.IntervalMS <= 0 || c.LastCheck == nil || c.NextCheck == nil ||
		c.NextCheck.Before(*c.LastCheck) {
		t.Fatalf("app checks: %s", body)
	}
}

// TestAdminHomeLogs reads the last lines of a real home's log, with the
// relay token masked, and follows it live over Server-Sent Events.
func TestAdminHomeLogs(t *testing.T) {
	t.Parallel()
	token := "relay-logs-" + time.Now().Format("150405.000000") + "-secret"
	secret := filepath.Join(t.TempDir(), "relay")
	if err := os.WriteFile(secret, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := admStart(t, admDetailConfig(secret), "")
	if code, _, body := a.do(t, "POST", "/admin/homes/demo/wake", admToken, nil, nil); code != http.StatusOK {
		t.Fatalf("wake: %d %s", code, body)
	}
	logs := func(q string) admin.LogView {
		t.Helper()
		code, _, body := a.do(t, "GET", "/admin/homes/demo/logs"+q, admToken, nil, nil)
		if code != http.StatusOK {
			t.Fatalf("logs%s: %d %s", q, code, body)
		}
		if strings.Contains(string(body), token) {
			t.Fatalf("logs%s leak the relay token: %s", q, body)
		}
		return admDecode[admin.LogView](t, body)
	}
	testbin.Eventually(t, "the home's start line in its log", func() bool {
		return strings.Contains(strings.Join(logs("").Lines, "\n"), "listening addr=")
	})
	// The home writes its token: the line is served masked.
	logFile := homeFile(a.data, "demo", "home.log")
	appendLog(t, logFile, "token="+token+" in a line\n")
	if l := logs("?lines=1").Lines; len(l) != 1 || l[0] != "token="+admin.MaskedSecret+" in a line" {
		t.Fatalf("last line %q: want the token masked", l)
	}

	for _, q := range []string{"?lines=x", "?lines=1001", "?follow=maybe"} {
		if code, _, body := a.do(t, "GET", "/admin/homes/demo/logs"+q, admToken, nil, nil); code != http.StatusBadRequest {
			t.Errorf("logs%s: %d %s, want 400", q, code, body)
		}
	}
	if code, _, _ := a.do(t, "GET", "/admin/homes/nobody/logs", admToken, nil, nil); code != http.StatusNotFound {
		t.Errorf("logs of an unknown home: %d", code)
	}

	// Follow: the last line, then a line the home writes afterwards.
	ctx, cancel := context.WithTimeout(context.Background(), testbin.WaitLimit)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", a.admin+"/admin/homes/demo/logs?lines=1&follow=1", nil)
	req.Header.Set("Authorization", "Bearer "+admToken)
	res, err := a.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); res.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("follow: %d %s", res.StatusCode, ct)
	}
	br := bufio.NewReader(res.Body)
	if l := readLogLine(t, br); !strings.Contains(l, admin.MaskedSecret) {
		t.Fatalf("first followed line %q: want the last line", l)
	}
	appendLog(t, logFile, "a new line\npartial ")
	if l := readLogLine(t, br); l != "a new line" {
		t.Fatalf("followed line %q", l)
	}
	appendLog(t, logFile, "line ends "+token+"\n")
	if l := readLogLine(t, br); l != "partial line ends "+admin.MaskedSecret {
		t.Fatalf("followed line %q: want the partial line completed and masked", l)
	}
}

// appendLog appends s to the log file at path, as the home would.
func appendLog(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// readLogLine reads the next "line" event of a followed log.
func readLogLine(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	ev := ""
	for {
		s, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("read log stream: %v", err)
		}
		s = strings.TrimRight(s, "\n")
		switch {
		case strings.HasPrefix(s, "event: "):
			ev = strings.TrimPrefix(s, "event: ")
		case strings.HasPrefix(s, "data: ") && ev == "line":
			var l string
			if err := json.Unmarshal([]byte(strings.TrimPrefix(s, "data: ")), &l); err != nil {
				t.Fatalf("line event %q: %v", s, err)
			}
			return l
		}
	}
}
