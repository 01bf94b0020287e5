package gateway_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/config"
	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/gateway"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider/all"
)

// rdGateway is a gateway serving a config file that a test rewrites and
// reloads.
type rdGateway struct {
	*e2eGateway
	path string // the config file
	head string // the file's fixed part: listen, data_dir, exec, admin
}

// rdStart writes a config file (head, then body) and serves it in the
// test process, with homes run by the real demo home; Reload reads the
// file again.
func rdStart(t *testing.T, body string) *rdGateway {
	t.Helper()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	head := fmt.Sprintf("listen: \"127.0.0.1:0\"\ndata_dir: %q\nexec:\n  command: [%q, \"demo-home\", \"--addr\", \"127.0.0.1:{port}\", \"--target\", \"{target}\"]\n",
		data, testbin.Build(t))
	rd := &rdGateway{path: filepath.Join(dir, "gw.yaml"), head: head}
	rd.write(t, body)
	cfg, err := all.LoadFile(rd.path)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	logs := &testbin.LogBuffer{}
	g, err := gateway.New(context.Background(), cfg, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatalf("gateway.New: %v", err)
	}
	g.SetReloadSource(func() (*config.Config, error) { return all.LoadFile(rd.path) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		g.Close()
		t.Fatal(err)
	}
	rd.e2eGateway = e2eServe(t, g, ln, data, logs)
	return rd
}

// write replaces the config file's body.
func (rd *rdGateway) write(t *testing.T, body string) {
	t.Helper()
	if err := os.WriteFile(rd.path, []byte(rd.head+body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// reload writes body and reloads it, failing the test on an error.
func (rd *rdGateway) reload(t *testing.T, body string) admin.Reload {
	t.Helper()
	rd.write(t, body)
	res, err := rd.g.Reload(context.Background(), admin.ReloadOptions{})
	if err != nil {
		t.Fatalf("reload: %v\n%s", err, body)
	}
	return res
}

// get sends a GET with header to path and returns the status and body.
func (rd *rdGateway) get(t *testing.T, c *http.Client, path string, header http.Header) (int, string) {
	t.Helper()
	res, body := e2eGet(t, c, "http://"+rd.addr+path, header)
	return res.StatusCode, string(body)
}

const rdBody = `
wake:
  idle_timeout: 0s
  warm_ttl: 10m
  hold: 1m
homes:
  - id: keep
  - id: gone
`

// TestReloadApplies reloads a changed file: a new home is served, a
// removed one goes (its process stopped), a changed hold applies to the
// next navigation, a change that needs a restart is named and not
// applied, and the home the file did not change keeps its WebSocket, its
// warm verdict and its process: it is not woken again.
func TestReloadApplies(t *testing.T) {
	t.Parallel()
	rd := rdStart(t, rdBody)
	c := e2eClient(t)
	// A navigation waits through the whole wake under hold 1m.
	for _, id := range []string{"keep", "gone"} {
		if code, body := rd.get(t, c, "/node/"+id+"/whoami", wtNav); code != http.StatusOK {
			t.Fatalf("%s before the reload: %d %s", id, code, body)
		}
	}
	conn, _, err := websocket.DefaultDialer.Dial("ws://"+rd.addr+"/node/keep/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	e2eHello(t, conn, "keep")
	goneDir := filepath.Join(rd.data, "homes", "gone")

	res := rd.reload(t, `
log:
  level: debug
wake:
  idle_timeout: 0s
  warm_ttl: 10m
  hold: 0s
homes:
  - id: keep
    display_name: Keep
    waiting_theme: dark
  - id: fresh
`)
	if !slices.Equal(res.HomesAdded, []string{"fresh"}) || !slices.Equal(res.HomesRemoved, []string{"gone"}) ||
		len(res.HomesChanged) != 0 || !slices.Contains(res.Applied, "wake.hold") || !slices.Equal(res.NeedRestart, []string{"log"}) {
		t.Fatalf("reload: %+v", res)
	}
	if code, body := rd.get(t, c, "/node/gone/whoami", nil); code != http.StatusNotFound {
		t.Errorf("removed home: %d %s", code, body)
	}
	testbin.Eventually(t, "the removed home's process to stop", func() bool { return len(testbin.HomePIDs(t, goneDir)) == 0 })
	// hold 0s: a navigation to the new, cold home gets the waiting page at once.
	if code, body := rd.get(t, c, "/node/fresh/", wtNav); code != http.StatusServiceUnavailable || !strings.Contains(body, "/_wakegate/wake/node/fresh") {
		t.Errorf("navigation to the new home: %d, want the waiting page:\n%s", code, body)
	}
	testbin.Eventually(t, "the new home to serve", func() bool {
		code, _ := rd.get(t, c, "/node/fresh/whoami", nil)
		return code == http.StatusOK
	})
	// The unchanged home: same verdict, same process, same WebSocket.
	if !rd.g.Engine().Warm("keep") {
		t.Error("the unchanged home lost its warm verdict")
	}
	e2eEcho(t, conn, websocket.TextMessage, []byte("after the reload"))
	if n := routesWakeStarts(rd.e2eGateway, "keep"); n != 1 {
		t.Errorf("the unchanged home was woken %d times; want once", n)
	}
	if code, body := rd.get(t, c, "/_wakegate/wake/node/keep", nil); code != http.StatusOK || !strings.Contains(body, `"ready":true`) {
		t.Errorf("status of the unchanged home: %d %s", code, body)
	}

	// A home whose settings change is registered again, a static home
	// joins at its endpoint, and a new access policy applies to the next
	// request.
	static := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "static home\n")
	}))
	t.Cleanup(static.Close)
	res = rd.reload(t, `
access:
  default: nobody
  policies:
    - {name: nobody, type: deny}
  homes:
    - {target: ext, policy: public}
wake:
  idle_timeout: 0s
  warm_ttl: 10m
  hold: 0s
homes:
  - id: keep
    display_name: Keep
    waiting_theme: dark
  - id: fresh
    probe: http
  - id: ext
    provider: static
    probe: http
    endpoint: `+static.URL+`
`)
	if !slices.Equal(res.HomesChanged, []string{"fresh"}) || !slices.Equal(res.HomesAdded, []string{"ext"}) || len(res.HomesRemoved) != 0 ||
		len(res.NeedRestart) != 0 || !slices.Contains(res.Applied, "access") {
		t.Fatalf("second reload: %+v", res)
	}
	if code, body := rd.get(t, c, "/node/keep/whoami", nil); code != http.StatusForbidden {
		t.Errorf("keep under the new deny policy: %d %s", code, body)
	}
	if code, body := rd.get(t, c, "/node/ext/x", nil); code != http.StatusOK || body != "static home\n" {
		t.Errorf("the static home added by the reload: %d %q", code, body)
	}
	if !rd.g.Engine().Warm("keep") {
		t.Error("the unchanged home lost its warm verdict")
	}
}

// TestReloadInvalid reloads files with problems: nothing changes, and the
// error names the file, the line and the field of each problem; the admin
// API answers 400 invalid_config with them in the cause.
func TestReloadInvalid(t *testing.T) {
	t.Parallel()
	rd := rdStart(t, rdBody+"admin:\n  listen: \"127.0.0.1:0\"\n  tokens: [\""+admToken+"\"]\n")
	c := e2eClient(t)
	if code, _ := rd.get(t, c, "/node/keep/whoami", nil); code != http.StatusOK {
		t.Fatalf("keep: %d", code)
	}
	lines := strings.Count(rd.head, "\n")
	for _, bad := range []struct{ body, want string }{
		{"wake:\n  hold: -1s\nhomes:\n  - id: keep\n", fmt.Sprintf("gw.yaml:%d: wake.hold: must not be negative", lines+2)},
		{"homes:\n  - id: keep\n  - id: Bad!\n", fmt.Sprintf("gw.yaml:%d: homes[1].id", lines+3)},
		{"homes:\n  - id: keep\n    colour: red\n", fmt.Sprintf("gw.yaml:%d: homes[0].colour: unknown field", lines+3)},
		{"homes: [\n", "gw.yaml"},
	} {
		rd.write(t, bad.body)
		_, err := rd.g.Reload(context.Background(), admin.ReloadOptions{})
		fe, ok := fault.As(err)
		if !ok || fe.Code != "invalid_config" || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("reload of\n%s: %v; want invalid_config naming %q", bad.body, err, bad.want)
		}
	}
	// Nothing changed: both homes serve, keep is still warm.
	for _, id := range []string{"keep", "gone"} {
		if code, body := rd.get(t, c, "/node/"+id+"/whoami", nil); code != http.StatusOK {
			t.Errorf("%s after refused reloads: %d %s", id, code, body)
		}
	}
	if n := routesWakeStarts(rd.e2eGateway, "keep"); n != 1 {
		t.Errorf("keep was woken %d times", n)
	}
	// Through the admin API.
	ctx, cancel := context.WithTimeout(context.Background(), testbin.WaitLimit)
	defer cancel()
	addr, err := rd.g.AdminAddr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rd.write(t, "wake:\n  hold: -1s\n")
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr.String()+"/admin/reload", nil)
	req.Header.Set("Authorization", "Bearer "+admToken)
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	eb := admDecode[admin.ErrorBody](t, body)
	if res.StatusCode != http.StatusBadRequest || eb.Error.Code != "invalid_config" ||
		!strings.Contains(eb.Error.Cause, fmt.Sprintf("gw.yaml:%d: wake.hold", lines+2)) || eb.Error.Hint == "" {
		t.Errorf("POST /admin/reload of a bad file: %d %s", res.StatusCode, body)
	}
}

// TestReloadUnderLoad reloads a gateway six times while clients keep
// requests going to a warm home and a WebSocket open on it: no request
// fails, whatever else each reload adds, changes or removes.
func TestReloadUnderLoad(t *testing.T) {
	t.Parallel()
	rd := rdStart(t, rdBody)
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}
	t.Cleanup(c.CloseIdleConnections)
	if code, _ := rd.get(t, c, "/node/keep/whoami", nil); code != http.StatusOK {
		t.Fatalf("keep: %d", code)
	}
	conn, _, err := websocket.DefaultDialer.Dial("ws://"+rd.addr+"/node/keep/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	e2eHello(t, conn, "keep")

	ctx, stop := context.WithCancel(context.Background())
	var ok, bad atomic.Int64
	var firstBad atomic.Value
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for ctx.Err() == nil {
				res, err := c.Get("http://" + rd.addr + "/node/keep/whoami")
				if err != nil {
					bad.Add(1)
					firstBad.CompareAndSwap(nil, err.Error())
					continue
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode/100 != 2 {
					bad.Add(1)
					firstBad.CompareAndSwap(nil, res.Status)
					continue
				}
				ok.Add(1)
			}
		})
	}
	bodies := []string{
		strings.Replace(rdBody, "hold: 1m", "hold: 2s", 1),
		rdBody + "  - id: extra\n",
		strings.Replace(rdBody, "  - id: gone\n", "", 1),
		rdBody + "apps:\n  - slug: site\n    home: keep\n    path: /node/keep\n",
		strings.Replace(rdBody, "  - id: gone\n", "  - id: gone\n    probe: http\n", 1),
		rdBody,
	}
	for i, b := range bodies {
		// Requests keep flowing between reloads: wait for some.
		before := ok.Load()
		testbin.Eventually(t, "requests between reloads", func() bool { return ok.Load() >= before+50 })
		rd.write(t, b)
		if _, err := rd.g.Reload(context.Background(), admin.ReloadOptions{}); err != nil {
			t.Fatalf("reload %d: %v", i, err)
		}
	}
	before := ok.Load()
	testbin.Eventually(t, "requests after the last reload", func() bool { return ok.Load() >= before+50 })
	stop()
	wg.Wait()
	e2eEcho(t, conn, websocket.TextMessage, []byte("after the reloads"))
	t.Logf("%d requests answered 2xx through 6 reloads, %d not", ok.Load(), bad.Load())
	if bad.Load() != 0 {
		t.Fatalf("%d requests failed during the reloads; the first: %v", bad.Load(), firstBad.Load())
	}
	if n := routesWakeStarts(rd.e2eGateway, "keep"); n != 1 {
		t.Errorf("keep was woken %d times; want once", n)
	}
}

// TestReloadRemoveAllNeedsConfirming: a file without homes and apps is an
// ordinary reload while the running config declares none, and is refused
// (fault.Conflict, reload_removes_all, nothing changed) once it declares
// some; an empty file is refused even then. AllowRemoveAll applies it.
func TestReloadRemoveAllNeedsConfirming(t *testing.T) {
	t.Parallel()
	rd := rdStart(t, "")
	if res := rd.reload(t, "wake:\n  hold: 0s\n"); len(res.Applied) != 1 || res.Applied[0] != "wake.hold" {
		t.Fatalf("a reload without homes while none run: %+v", res)
	}
	if res := rd.reload(t, "homes:\n  - id: a\n"); len(res.HomesAdded) != 1 {
		t.Fatalf("home a not added: %+v", res)
	}
	refused := func(what string) {
		t.Helper()
		_, err := rd.g.Reload(context.Background(), admin.ReloadOptions{})
		fe, ok := fault.As(err)
		if !ok || fe.Kind != fault.Conflict || fe.Code != "reload_removes_all" || !strings.Contains(fe.Message, "1 home and 0 apps") {
			t.Fatalf("reload of %s: %v; want 409 reload_removes_all counting 1 home", what, err)
		}
		if !rd.g.Engine().Known("a") {
			t.Fatalf("the refused reload of %s removed home a", what)
		}
	}
	rd.write(t, "wake:\n  hold: 0s\n")
	refused("a file without homes")
	if err := os.WriteFile(rd.path, []byte("# emptied\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	refused("an empty file")
	res, err := rd.g.Reload(context.Background(), admin.ReloadOptions{AllowRemoveAll: true})
	if err != nil || len(res.HomesRemoved) != 1 {
		t.Fatalf("a confirmed reload: %+v, %v; want home a removed", res, err)
	}
}
