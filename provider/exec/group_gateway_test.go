package execprov

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
)

// groupGatewayConfig is a gateway whose home g1 is a group of three demo
// homes: db (listens after 500 ms, probed by tcp), the entry app (the
// section's command, after db) and worker (after db and app).
const groupGatewayConfig = `listen: "%ADDR%"
data_dir: "%DATA%"
log:
  access: false
wake:
  ready_timeout: 20s
  idle_timeout: 4s
homes:
  - id: g1
    options:
      members:
        - {name: db, probe: tcp, command: ["{self}", demo-home, --addr, "127.0.0.1:{port}", --boot-delay, 500ms]}
        - {name: worker, probe: tcp, depends_on: [db, app], command: ["{self}", demo-home, --addr, "127.0.0.1:{port}"]}
        - {name: app, entry: true, depends_on: [db]}
  - id: g2
    options:
      members:
        - {name: db, probe: tcp, command: [/bin/sh, -c, "echo no database today >&2; exit 3"]}
        - {name: app, entry: true, depends_on: [db]}
`

// startedRE finds the provider's log line of a process it started.
var startedRE = regexp.MustCompile(`msg="exec: started home"[^\n]*? home=(\S+) pid=(\d+)`)

// starts are the pids the gateway's log says it started, by home id.
func starts(out string) map[string][]int {
	m := map[string][]int{}
	for _, s := range startedRE.FindAllStringSubmatch(out, -1) {
		pid, _ := strconv.Atoi(s[2])
		m[s[1]] = append(m[s[1]], pid)
	}
	return m
}

// TestGatewayWakesGroup: 100 concurrent callers of a sleeping group all
// get 200 from its entry, each member started once, the entry only after
// db listened; a member killed between wakes makes the next request start
// the group again; the idle suspend stops all three.
func TestGatewayWakesGroup(t *testing.T) {
	gw := testbin.Serve(t, groupGatewayConfig)
	get := func() string {
		resp, err := http.Get("http://" + gw.Addr + "/node/g1/")
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.Status
	}
	const callers = 100
	began := time.Now()
	codes := make(chan string, callers)
	took := make(chan time.Duration, callers)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			codes <- get()
			took <- time.Since(began)
		})
	}
	wg.Wait()
	close(codes)
	close(took)
	var times []time.Duration
	for d := range took {
		times = append(times, d)
	}
	slices.Sort(times)
	t.Logf("%d callers of the sleeping group (db listening after 500 ms): first answer %s, median %s, p99 %s",
		callers, times[0], times[len(times)/2], times[len(times)*99/100])
	for c := range codes {
		if c != "200 OK" {
			t.Fatalf("a caller got %s, want 200 from the entry", c)
		}
	}
	out := gw.Output()
	first := starts(out)
	for _, id := range []string{"g1@db", "g1", "g1@worker"} {
		if n := len(first[id]); n != 1 {
			t.Fatalf("%s started %d times, want once\n%s", id, n, out)
		}
	}
	ready := regexp.MustCompile(`msg="exec: member ready"[^\n]*? home=g1 member=db `).FindStringIndex(out)
	entry := regexp.MustCompile(`msg="exec: started home"[^\n]*? home=g1 `).FindStringIndex(out)
	if ready == nil || entry == nil || entry[0] < ready[0] {
		t.Fatalf("the entry started before db was ready (log offsets %v, %v)\n%s", ready, entry, out)
	}

	// A member killed between wakes: the next request starts the group
	// again, whole.
	if err := syscall.Kill(first["g1@db"][0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testbin.Eventually(t, "the gateway noticing db's exit", func() bool {
		return strings.Contains(gw.Output(), "a member of a group exited")
	})
	if c := get(); c != "200 OK" {
		t.Fatalf("after db was killed, a request got %s, want 200\n%s", c, gw.Output())
	}
	second := starts(gw.Output())
	for _, id := range []string{"g1@db", "g1", "g1@worker"} {
		if n := len(second[id]); n != 2 {
			t.Fatalf("%s started %d times in all, want twice: the group starts again whole\n%s", id, n, gw.Output())
		}
	}
	for _, pid := range []int{first["g1"][0], first["g1@worker"][0]} {
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("pid %d of the first group runs on beside the second", pid)
		}
	}

	// The idle suspend stops every member.
	testbin.Eventually(t, "the idle suspend stopping every member", func() bool {
		for _, ps := range second {
			if syscall.Kill(ps[1], 0) == nil {
				return false
			}
		}
		return true
	})
	// A member that fails: the caller gets a code and a sentence, the
	// operator's log names the member and its cause.
	resp, err := http.Get("http://" + gw.Addr + "/node/g2/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var answer struct {
		Error struct{ Code, Message string }
	}
	_ = json.Unmarshal(body, &answer)
	said := answer.Error.Code + " " + answer.Error.Message
	if resp.StatusCode < 500 || answer.Error.Message == "" || strings.Contains(said, "db") || strings.Contains(said, "member") ||
		strings.Contains(string(body), "database") {
		t.Fatalf("a failed group's caller got %s %q: want a 5xx with a code and a sentence naming no member", resp.Status, body)
	}
	// The request's log line follows its answer.
	hint := regexp.MustCompile(`hint="member db: it exits at once[^"]*"[^\n]*no database today|no database today[^\n]*hint="member db: it exits at once`)
	if !testbin.Poll(10*time.Second, 20*time.Millisecond, func() bool { return hint.MatchString(gw.Output()) }) {
		var g2 []string
		for line := range strings.SplitSeq(gw.Output(), "\n") {
			if strings.Contains(line, "g2") {
				g2 = append(g2, line)
			}
		}
		t.Fatalf("the log has no hint naming member db and its cause:\n%s", strings.Join(g2, "\n"))
	}
	t.Logf("a failed group's caller got %s %s", resp.Status, body)
	for line := range strings.SplitSeq(gw.Output(), "\n") {
		if strings.Contains(line, `msg="exec:`) || strings.Contains(line, "home stopped") || strings.Contains(line, "idle") {
			t.Log(line)
		}
	}
}
