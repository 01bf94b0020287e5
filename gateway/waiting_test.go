package gateway_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/homefault"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider/all"
	"github.com/wakegate/wakegate/wakerecord"
)

// wtCrashMark is what the crashing home writes before it exits: an
// operator's detail that no public answer may carry.
const wtCrashMark = "crash-marker-7f3a"

// wtStart serves a gateway with two exec homes: "slow" (the demo home,
// listening after a 2 s boot, shown as a display name that needs escaping)
// and "crash" (exits with status 3 at once, every time, until the exec
// provider gives up on it). extra is more YAML for the wake section.
func wtStart(t *testing.T, wakeExtra string) *e2eGateway {
	t.Helper()
	return wtStartWith(t, "2s", wakeExtra+`
homes:
  - id: slow
    display_name: "Alice's <notebook>"
  - id: crash
`)
}

// wtStartWith serves a gateway whose exec homes are the demo home
// listening after boot, except a home with target crash, which crashes as
// wtStart's does; extra is more YAML for the wake section and after it.
func wtStartWith(t *testing.T, boot, extra string) *e2eGateway {
	t.Helper()
	script := fmt.Sprintf(`if [ {target} = crash ]; then echo %s >&2; sleep 0.5; exit 3; fi; exec %q demo-home --addr 127.0.0.1:{port} --target {target} --boot-delay %s`,
		wtCrashMark, testbin.Build(t), boot)
	command := fmt.Sprintf("[\"/bin/sh\", \"-c\", %q]", script)
	return e2eStartWithCommand(t, command, `
wake:
  idle_timeout: 0s
  hold: 300ms
`+extra)
}

// wtNav is a browser navigation's Accept header.
var wtNav = http.Header{"Accept": {"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}}

// wtEvents reads the status stream of home target to its end and returns
// its events' data and the stream's request id (as the gateway's log names
// it).
func wtEvents(t *testing.T, gw *e2eGateway, target string) (events []map[string]any, raw string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+gw.addr+"/_wakegate/wake/node/"+target, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	res, err := e2eClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status stream: %d %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	var all strings.Builder
	br := bufio.NewReader(io.TeeReader(res.Body, &all))
	event := ""
	for {
		line, err := br.ReadString('\n')
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("read the stream: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if event != "phase" {
				t.Fatalf("data of event %q", event)
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &m); err != nil {
				t.Fatalf("event data %q: %v", line, err)
			}
			events = append(events, m)
		}
	}
	return events, all.String()
}

// wtPublicKeys are the only keys a status report may carry.
var wtPublicKeys = []string{"ready", "phase", "elapsed_ms", "code", "error", "request_id"}

// wtLeaks returns what of the home's internals text reveals: its address
// or port, its process id, its command, its data folder, its own output.
func wtLeaks(t *testing.T, gw *e2eGateway, text string) []string {
	t.Helper()
	secrets := []string{"127.0.0.1", "demo-home", "/bin/sh", "exit status", wtCrashMark, gw.data, testbin.Build(t)}
	for _, m := range regexp.MustCompile(`endpoint=http://127\.0\.0\.1:(\d+)`).FindAllStringSubmatch(gw.logs.String(), -1) {
		secrets = append(secrets, ":"+m[1])
	}
	for _, m := range regexp.MustCompile(`pid=(\d+)`).FindAllStringSubmatch(gw.logs.String(), -1) {
		secrets = append(secrets, m[1])
	}
	var out []string
	for _, s := range secrets {
		if s != "" && strings.Contains(text, s) {
			out = append(out, s)
		}
	}
	return out
}

// TestWaitingStreamPhases follows the status stream of a home with a 2 s
// boot, woken by a browser's navigation, and of a home that crashes: the
// first shows its phases in order and ends ready; the second ends failed
// with a public code, a sentence and the request id under which the log
// has the cause. No report carries anything but the phase, the time and a
// failure's public answer, and watching starts no wake.
func TestWaitingStreamPhases(t *testing.T) {
	t.Parallel()
	gw := wtStart(t, "")
	c := e2eClient(t)
	for _, target := range []string{"slow", "crash"} {
		t.Run(target, func(t *testing.T) {
			res, body := e2eGet(t, c, "http://"+gw.addr+"/node/"+target+"/", wtNav)
			if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "/_wakegate/wake/node/"+target) {
				t.Fatalf("navigation: %d, want the waiting page:\n%s", res.StatusCode, body)
			}
			events, raw := wtEvents(t, gw, target)
			if len(events) == 0 {
				t.Fatal("no event")
			}
			var phases []string
			for _, ev := range events {
				for k := range ev {
					if !slices.Contains(wtPublicKeys, k) {
						t.Errorf("report carries %q: %v", k, ev)
					}
				}
				phases = append(phases, ev["phase"].(string))
			}
			if leaks := wtLeaks(t, gw, raw+string(body)); len(leaks) > 0 {
				t.Errorf("the stream or the page reveals %q:\n%s", leaks, raw)
			}
			last := events[len(events)-1]
			switch target {
			case "slow":
				if !slices.Contains(phases, wakerecord.Probing) || last["phase"] != wakerecord.Ready || last["ready"] != true {
					t.Fatalf("phases %v; want probing, then ready", phases)
				}
				if !strings.Contains(string(body), "Alice&#39;s &lt;notebook&gt;") || strings.Contains(string(body), "<notebook>") {
					t.Errorf("the page does not show the display name, escaped:\n%s", body)
				}
			case "crash":
				id, _ := last["request_id"].(string)
				if last["phase"] != wakerecord.Failed || last["code"] != homefault.CodeHomeFailed || last["error"] == "" || id == "" {
					t.Fatalf("last report %v; want failed, home_failed, a sentence and a request id", last)
				}
				// The operator finds the cause under the request id shown.
				found := false
				for _, line := range gw.logs.Lines(`"request failed"`) {
					found = found || strings.Contains(line, "request_id="+id) && strings.Contains(line, "exit status 3")
				}
				if !found {
					t.Errorf("no log line with request id %s and the exit status:\n%s", id, gw.logs.String())
				}
			}
			if n := routesWakeStarts(gw, target); n != 1 {
				t.Errorf("%d wakes of %s; want the navigation's one", n, target)
			}
		})
	}
	// Watching a failed home again starts no wake.
	for range 3 {
		if events, _ := wtEvents(t, gw, "crash"); len(events) != 1 || events[0]["phase"] != wakerecord.Failed {
			t.Fatalf("stream of the failed home: %v", events)
		}
	}
	if n := routesWakeStarts(gw, "crash"); n != 1 {
		t.Fatalf("watching the failed home started %d wakes", n-1)
	}
}

// TestWaitingPageWithoutScript follows the waiting page as a browser
// without JavaScript does: the meta refresh goes to the status URL, which
// shows the page again while the home wakes and sends the browser back to
// the page it asked for (303) once the home is ready; for a home that
// failed it shows the failure, with a retry link and no refresh, and
// starts no wake.
func TestWaitingPageWithoutScript(t *testing.T) {
	t.Parallel()
	gw := wtStart(t, "")
	c := e2eClient(t)
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	refreshRE := regexp.MustCompile(`<meta http-equiv="refresh" content="(\d+);url=([^"]+)">`)
	for _, target := range []string{"slow", "crash"} {
		page := "/node/" + target + "/whoami?x=1"
		res, body := e2eGet(t, c, "http://"+gw.addr+page, wtNav)
		m := refreshRE.FindStringSubmatch(string(body))
		if res.StatusCode != http.StatusServiceUnavailable || m == nil {
			t.Fatalf("%s: %d, want the waiting page with a meta refresh:\n%s", target, res.StatusCode, body)
		}
		next := strings.ReplaceAll(m[2], "&amp;", "&")
		u, err := url.Parse(next)
		if err != nil || u.Path != "/_wakegate/wake/node/"+target || u.Query().Get("to") != page {
			t.Fatalf("%s: refresh to %q", target, next)
		}
		var final *http.Response
		var finalBody []byte
		testbin.Eventually(t, target+"'s refresh to end", func() bool {
			final, finalBody = e2eGet(t, c, "http://"+gw.addr+next, wtNav)
			return final.StatusCode == http.StatusSeeOther || !refreshRE.Match(finalBody)
		})
		switch target {
		case "slow":
			if final.StatusCode != http.StatusSeeOther || final.Header.Get("Location") != page {
				t.Fatalf("slow: %d to %q; want 303 to %s", final.StatusCode, final.Header.Get("Location"), page)
			}
			res, body := e2eGet(t, c, "http://"+gw.addr+page, wtNav)
			if res.StatusCode != http.StatusOK || !strings.Contains(string(body), `"path":"/node/slow/whoami"`) {
				t.Fatalf("slow after the redirect: %d %s", res.StatusCode, body)
			}
		case "crash":
			s := string(finalBody)
			if final.StatusCode != http.StatusServiceUnavailable || !strings.Contains(s, `data-phase="failed"`) ||
				!strings.Contains(s, `href="/node/crash/whoami?x=1"`) || !regexp.MustCompile(`id="request-id">[^<]+<`).MatchString(s) {
				t.Fatalf("crash: %d, want the failure with a retry link and a request id:\n%s", final.StatusCode, s)
			}
			if leaks := wtLeaks(t, gw, s); len(leaks) > 0 {
				t.Errorf("the failure page reveals %q", leaks)
			}
		}
		if n := routesWakeStarts(gw, target); n != 1 {
			t.Errorf("%d wakes of %s; want the navigation's one", n, target)
		}
	}
	// A refresh never sends the browser off the site.
	for _, to := range []string{"//evil.example/", "https://evil.example/", "/\\evil.example", ""} {
		res, _ := e2eGet(t, c, "http://"+gw.addr+"/_wakegate/wake/node/slow?to="+url.QueryEscape(to), wtNav)
		if loc := res.Header.Get("Location"); res.StatusCode != http.StatusSeeOther || loc != "/node/slow/" {
			t.Errorf("to=%q: %d to %q; want 303 to /node/slow/", to, res.StatusCode, loc)
		}
	}
}

// TestWaitingPageTemplate serves an operator's own waiting page: it is
// used, with every value escaped; a template that does not parse, or that
// names a variable that does not exist, fails the config load with the
// config's file, line and field and the template's own line.
func TestWaitingPageTemplate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.html", `<h1>Our own page for {{.Name}}</h1><p id="p">{{.Phase}}</p><a href="{{.RetryURL}}">again</a>`)
	gw := wtStart(t, fmt.Sprintf("  waiting_page: %q\n", good))
	res, body := e2eGet(t, e2eClient(t), "http://"+gw.addr+"/node/slow/", wtNav)
	if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "Our own page for Alice&#39;s &lt;notebook&gt;") {
		t.Fatalf("own page: %d\n%s", res.StatusCode, body)
	}

	for _, c := range []struct{ name, text, want string }{
		{"unclosed.html", "<p>\n{{if .Name}}</p>", "unclosed.html:2"},
		{"unknown.html", "<p>{{.Secret}}</p>", "Secret"},
	} {
		p := write(c.name, c.text)
		yml := fmt.Sprintf("listen: 127.0.0.1:0\nwake:\n  hold: 1s\n  waiting_page: %q\n", p)
		_, err := all.Load("gw.yaml", []byte(yml))
		if err == nil || !strings.Contains(err.Error(), "gw.yaml:4: wake.waiting_page:") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want gw.yaml:4: wake.waiting_page and %q", c.name, err, c.want)
		}
	}
	_, err := all.Load("gw.yaml", []byte("homes:\n  - id: a\n    display_name: \"a\\nb\"\n"))
	if err == nil || !strings.Contains(err.Error(), "gw.yaml:3: homes[0].display_name") {
		t.Errorf("display name with a newline: %v", err)
	}
}

// TestWaitingPageCountsTheWait: a browser held for wake.hold whose app is
// still unpublished when the hold ends, its home up but the app slow to
// answer its first request (a development server compiling its page),
// gets a waiting page whose clock starts at the time it has already
// waited, not at zero: the home's wake is over, but the caller's wait is
// not, and the page that says "0.0 s" once ready is wrong.
func TestWaitingPageCountsTheWait(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("/usr/bin/python3 is not installed")
	}
	// The app's pages take 3 s; the home's own paths answer at once.
	script := `import http.server, sys, time
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if not self.path.startswith("/node/"):
            time.sleep(3)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
`
	cmd := fmt.Sprintf(`["/usr/bin/python3", "-c", %q, "{port}"]`, script)
	gw := e2eStartWithCommand(t, cmd, `
wake:
  idle_timeout: 0s
  hold: 400ms
homes:
  - id: desk
    probe:
      kind: tcp
apps:
  - slug: desk
    home: desk
    health:
      timeout: 10s
`)
	c := e2eClient(t)
	// An API caller wakes the home and is answered by it.
	if res, body := e2eGet(t, c, "http://"+gw.addr+"/node/desk/", nil); res.StatusCode != http.StatusOK {
		t.Fatalf("waking the home: %d %s", res.StatusCode, body)
	}
	res, body := e2eGet(t, c, "http://"+gw.addr+"/apps/desk/", wtNav)
	m := regexp.MustCompile(`t0 = Date\.now\(\) -\s*(\d+)`).FindSubmatch(body)
	if res.StatusCode != http.StatusServiceUnavailable || m == nil {
		t.Fatalf("%d, want the waiting page with its clock:\n%s", res.StatusCode, body)
	}
	if ms, _ := strconv.Atoi(string(m[1])); ms < 400 {
		t.Errorf("the page's clock starts at %d ms; the browser had waited the 400 ms hold before it", ms)
	}
}
