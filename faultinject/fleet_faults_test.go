package faultinject

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/registry/registrytest"
	"gopkg.in/yaml.v3"
)

// The fleet fault suite (DESIGN rules 28, 32 and 33, issue 47): three
// gateways started together on a real redis-server, each through a TCP
// relay of its own, one exec home (the demo home, logging every request it
// serves), a process counter sampling /proc every 20 ms, clients driving
// requests through every gateway throughout, and a schedule of faults:
// the runner paused for two heartbeat TTLs, its link to Redis frozen and
// healed, Redis restarted empty, the runner paused for five TTLs, idle
// suspends racing slow requests through the other gateways, a gateway
// SIGKILLed 0.3 s into a cold wake, Redis paused, and admin suspends
// between them. The checker fails the run on two processes of the home at
// any sample, on any 5xx without Retry-After, on a home unserved for
// longer than the heartbeat TTL plus one wake after a fault ends, on any
// request that reached the home's process after the fleet confirmed its
// stop, and on a final state where a gateway's admin API disagrees with
// the processes that exist.
//
// WAKEGATE_FAULTS=long runs the schedule three times.

// faultHeal bounds the time from the end of a fault to the home served
// again through every live gateway: the heartbeat TTL plus one wake.
const faultHeal = heartbeatTTL + 5*time.Second

// requestLog is the demo home's request log, in its working directory:
// a line per request with its arrival (Unix nanoseconds), the pid that
// served it and the path.
const requestLog = "requests.log"

// suspendLine is a gateway's log line of a suspend that went through: its
// time is written once the process is down, and ms is the stop's own
// length, which began when the fleet's handshake had confirmed the home
// unused.
var suspendLine = regexp.MustCompile(`(?m)^time=(\S+) level=INFO msg=suspend .*\bhome=(\S+) .*\bms=([0-9.]+)`)

// checkNoForwardToStopping is the checker of "no request is forwarded to
// a home in stopping" (DESIGN rule 33): from the gateways' logs it takes
// every suspend that went through, the window from the handshake's
// confirmation to the process's end, and from the home's request logs
// every request that reached a process inside one. It returns those
// requests, as lines for the failure message.
func checkNoForwardToStopping(t *testing.T, logs []string, dirs []string) (windows int, forwards []string) {
	t.Helper()
	type window struct{ from, to int64 }
	var ws []window
	// Log times have millisecond precision: the window is narrowed by
	// that much at each end, so that it holds only what surely came after.
	const slack = int64(2 * time.Millisecond)
	for _, out := range logs {
		for _, line := range strings.Split(out, "\n") {
			if !strings.Contains(line, "msg=suspend ") {
				continue
			}
			m := suspendLine.FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("a suspend's log line the checker cannot read: %q", line)
			}
			if m[2] != fiHome {
				continue
			}
			end, err := time.Parse(time.RFC3339Nano, m[1])
			ms, perr := strconv.ParseFloat(m[3], 64)
			if err != nil || perr != nil {
				t.Fatalf("suspend line %q: %v %v", line, err, perr)
			}
			to := end.UnixNano() - slack
			from := end.UnixNano() - int64(ms*float64(time.Millisecond)) + slack
			if from < to {
				ws = append(ws, window{from, to})
			}
		}
	}
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, requestLog))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var at int64
			var pid int
			var path string
			if _, err := fmt.Sscanf(line, "%d %d %s", &at, &pid, &path); err != nil {
				continue
			}
			for _, w := range ws {
				if at > w.from && at < w.to {
					forwards = append(forwards, fmt.Sprintf("%s to pid %d at %s, inside a stop from %s to %s", path, pid,
						time.Unix(0, at).Format("15:04:05.000000"), time.Unix(0, w.from).Format("15:04:05.000"),
						time.Unix(0, w.to).Format("15:04:05.000")))
				}
			}
		}
	}
	return len(ws), forwards
}

// faultRun is the state of one run of the suite.
type faultRun struct {
	t      *testing.T
	srv    *registrytest.RedisServer
	relays []*tcpRelay
	gws    []*fiGateway
	samp   *procSampler

	paused []atomic.Bool // a paused or dead gateway's client stops counting
	quiet  atomic.Bool   // every client stops sending (the idle race drives its own)
	logs   []string      // the output of gateway runs that ended (killed)
	// faulted counts the faults of each gateway: a request that spans
	// one (sent before its gateway was paused, answered after) counts
	// neither its answer nor its wait.
	faulted []atomic.Int64

	requests   atomic.Int64
	ok         atomic.Int64
	noRetry    atomic.Int64
	firstNoRet atomic.Pointer[string]

	faults    int
	worstHeal time.Duration

	gapMu  sync.Mutex
	maxGap time.Duration // the longest a live gateway's client went without a 200
	gapAt  string
}

// served records a 200 through gateway i after last, the previous one
// (or the client's start, or its gateway's resumption).
func (r *faultRun) served(i int, last time.Time) {
	gap := time.Since(last)
	r.gapMu.Lock()
	defer r.gapMu.Unlock()
	if gap > r.maxGap {
		r.maxGap, r.gapAt = gap, fmt.Sprintf("gw-%d at %s", i, time.Now().Format("15:04:05.000"))
	}
}

// drive sends requests through gateway i until stop closes.
func (r *faultRun) drive(i int, stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	c := fleetClient()
	c.Timeout = 30 * time.Second
	last := time.Now()
	for {
		select {
		case <-stop:
			return
		default:
		}
		if r.paused[i].Load() || r.quiet.Load() {
			time.Sleep(50 * time.Millisecond)
			last = time.Now()
			continue
		}
		before := r.faulted[i].Load()
		res, body, err := r.gws[i].get(c, fiWhoami)
		if r.paused[i].Load() || r.faulted[i].Load() != before {
			last = time.Now()
			continue // the answer of a gateway being paused or killed
		}
		r.requests.Add(1)
		switch {
		case err != nil:
		case res.StatusCode == http.StatusOK:
			r.ok.Add(1)
			r.served(i, last)
			last = time.Now()
		case res.StatusCode/100 == 5 && res.Header.Get("Retry-After") == "":
			r.noRetry.Add(1)
			s := fmt.Sprintf("gw-%d: %d %s", i, res.StatusCode, body)
			r.firstNoRet.CompareAndSwap(nil, &s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runner returns the index of the gateway the record names as the home's
// runner, -1 when none.
func (r *faultRun) runner() int {
	store := openFleetStore(r.t, r.srv)
	h, err := store.GetHome(r.t.Context(), fiHome)
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimPrefix(h.Runner, "gw-"))
	if err != nil {
		return -1
	}
	return n
}

// wakeThrough makes sure the home runs, woken through gateway i, and
// returns its runner.
func (r *faultRun) wakeThrough(i int) int {
	c := fleetClient()
	c.Timeout = 30 * time.Second
	n := -1
	if !testbin.Poll(faultHeal+20*time.Second, 100*time.Millisecond, func() bool {
		if res, _, err := r.gws[i].get(c, fiWhoami); err == nil && res.StatusCode == http.StatusOK {
			n = r.runner()
		}
		return n >= 0
	}) {
		r.t.Fatalf("the home was not served through gw-%d", i)
	}
	return n
}

// healed waits until the home answers 200 through every live gateway
// (skip is one left out) and records the time since the fault ended.
func (r *faultRun) healed(name string, ended time.Time, skip int) {
	c := fleetClient()
	c.Timeout = 10 * time.Second
	for i, g := range r.gws {
		if i == skip {
			continue
		}
		if !testbin.Poll(3*faultHeal-time.Since(ended), 50*time.Millisecond, func() bool {
			res, _, err := g.get(c, fiWhoami)
			return err == nil && res.StatusCode == http.StatusOK
		}) {
			r.t.Fatalf("%s: gw-%d did not serve the home within %s of the fault's end", name, i, 3*faultHeal)
		}
	}
	took := time.Since(ended)
	r.faults++
	if took > r.worstHeal {
		r.worstHeal = took
	}
	if took > faultHeal {
		r.t.Fatalf("%s: the home was served through every gateway %s after the fault ended, want within %s", name, took, faultHeal)
	}
	r.t.Logf("fault %d (%s): healed in %s", r.faults, name, took.Round(10*time.Millisecond))
}

// pauseRunner SIGSTOPs the runner for d, then resumes it.
func (r *faultRun) pauseRunner(d time.Duration) {
	n := r.wakeThrough(0)
	g := r.gws[n]
	r.faulted[n].Add(1)
	r.paused[n].Store(true)
	if err := g.Signal(syscall.SIGSTOP); err != nil {
		r.t.Fatal(err)
	}
	time.Sleep(d)
	_ = g.Signal(syscall.SIGCONT)
	r.paused[n].Store(false)
	r.healed(fmt.Sprintf("runner gw-%d paused %s", n, d), time.Now(), -1)
}

// freezeRunnerLink freezes the runner's link to Redis for d, then heals
// it. With quiet, no request goes through the cut-off gateway meanwhile:
// a lock command it sends into the frozen link reaches Redis when the
// link heals, after its client gave up, and holds the home's wake lock
// for its whole lease; the client's cleanup of such commands is the
// fix of the wake-lock work, and quiet keeps it out of this fault.
func (r *faultRun) freezeRunnerLink(d time.Duration, quiet bool) {
	n := r.wakeThrough(1)
	if quiet {
		r.faulted[n].Add(1)
		r.paused[n].Store(true)
	}
	r.relays[n].freeze()
	time.Sleep(d)
	r.relays[n].heal()
	r.paused[n].Store(false)
	r.healed(fmt.Sprintf("runner gw-%d's link to Redis frozen %s", n, d), time.Now(), -1)
}

// restartRedisEmpty kills the (volatile) server and starts it again,
// empty.
func (r *faultRun) restartRedisEmpty() {
	r.wakeThrough(2)
	r.srv.Kill()
	time.Sleep(500 * time.Millisecond)
	r.srv.Restart()
	r.healed("Redis restarted empty", time.Now(), -1)
}

// pauseRedis SIGSTOPs the server for d.
func (r *faultRun) pauseRedis(d time.Duration) {
	r.wakeThrough(0)
	r.srv.Signal(syscall.SIGSTOP)
	time.Sleep(d)
	r.srv.Signal(syscall.SIGCONT)
	r.healed(fmt.Sprintf("Redis paused %s", d), time.Now(), -1)
}

// killMidColdWake suspends the home, starts a cold wake through gw-0,
// SIGKILLs gw-0 once a wake has started the home's process (the home boots
// for 1 s) and starts gw-0 again once the others serve.
func (r *faultRun) killMidColdWake() {
	r.faulted[0].Add(1)
	r.paused[0].Store(true)
	defer r.paused[0].Store(false)
	testbin.Poll(faultHeal, 100*time.Millisecond, func() bool {
		if len(countIn(homeDirs(r.gws))) == 0 {
			return true
		}
		r.suspendThrough(1)
		return false
	})
	go func() {
		c := fleetClient()
		c.Timeout = 5 * time.Second
		_, _, _ = r.gws[0].get(c, fiWhoami)
	}()
	// The clients of gw-1 and gw-2 keep sending: whichever wake starts the
	// home first, the kill lands while its process boots.
	testbin.Eventually(r.t, "a cold wake to start the home", func() bool { return len(countIn(homeDirs(r.gws))) != 0 })
	r.gws[0].kill(r.t)
	r.logs = append(r.logs, r.gws[0].Output())
	r.healed("gw-0 SIGKILLed as a cold wake started the home", time.Now(), 0)
	r.gws[0].start(r.t)
}

// suspendThrough suspends the home through gateway i's admin API (a suspend
// refused as busy is not a fault of the run) and waits a moment.
func (r *faultRun) suspendThrough(i int) {
	code, body := r.gws[i].adminSend(r.t, http.MethodPost, "/admin/homes/"+fiHome+"/suspend", "")
	if code/100 != 2 && code != http.StatusConflict && code != http.StatusServiceUnavailable {
		r.t.Fatalf("suspend through gw-%d: %d %s", i, code, body)
	}
}

// setIdle sets the home's idle timeout to d on every gateway, through a
// reload of its config file.
func (r *faultRun) setIdle(d string) {
	for i, g := range r.gws {
		b, err := os.ReadFile(g.config)
		if err != nil {
			r.t.Fatal(err)
		}
		var cfg map[string]any
		if err := yaml.Unmarshal(b, &cfg); err != nil {
			r.t.Fatal(err)
		}
		homes, _ := cfg["homes"].([]any)
		h, _ := homes[0].(map[string]any)
		h["idle_timeout"] = d
		if b, err = yaml.Marshal(cfg); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(g.config, b, 0o600); err != nil {
			r.t.Fatal(err)
		}
		if code, body := g.adminSend(r.t, http.MethodPost, "/admin/reload", ""); code != http.StatusOK {
			r.t.Fatalf("reload gw-%d with the home's idle_timeout %s: %d %s", i, d, code, body)
		}
	}
}

// idleRace gives the home a short idle timeout and sends n slow requests
// through the gateways that do not run it, each the moment the fleet's
// session reports say the home has none, while its runner, which sees no
// request of its own, decides it idle at every tick. Every request must be
// answered 200: one in flight keeps the home up, one that meets a
// stopping home waits for the next wake.
func (r *faultRun) idleRace(n int) {
	r.quiet.Store(true)
	defer r.quiet.Store(false)
	runner := r.wakeThrough(0)
	r.setIdle("1s")
	defer r.setIdle("0s")
	store := openFleetStore(r.t, r.srv)
	c := fleetClient()
	c.Timeout = 30 * time.Second
	backoffs0, suspends0 := decided(r.gws[runner].Output())
	// A request of its own starts the runner's idle clock: a home that
	// never had a session here is not idle here.
	if _, _, err := r.gws[runner].get(c, fiWhoami); err != nil {
		r.t.Fatal(err)
	}
	for i := range n {
		testbin.Eventually(r.t, "the fleet reports no session on the home", func() bool {
			s, err := store.FleetSessions(context.Background(), fiHome)
			return err == nil && s == 0
		})
		g := (runner + 1 + i%2) % len(r.gws)
		res, body, err := r.gws[g].get(c, "/node/"+fiTarget+"/slow?d=1500ms")
		r.requests.Add(1)
		switch {
		case err != nil:
			r.t.Fatalf("idle race: a slow request through gw-%d: %v", g, err)
		case res.StatusCode != http.StatusOK:
			r.t.Fatalf("idle race: a slow request through gw-%d while gw-%d decided idle: %d %s", g, runner, res.StatusCode, body)
		}
		r.ok.Add(1)
	}
	r.faults++
	backoffs, suspends := decided(r.gws[runner].Output())
	r.t.Logf("fault %d (idle suspends of gw-%d racing %d slow requests): %d backed off, %d suspended", r.faults, runner, n,
		backoffs-backoffs0, suspends-suspends0)
}

// decided counts in a gateway's output the suspends it backed off and
// the ones that went through.
func decided(out string) (backoffs, suspends int) {
	return strings.Count(out, "suspend backed off"), len(suspendLine.FindAllString(out, -1))
}

// adminAgrees fails the run unless every gateway's admin API says the
// home runs exactly when one process of it exists.
func (r *faultRun) adminAgrees() {
	var bad []string
	if !testbin.Poll(faultHeal, 200*time.Millisecond, func() bool {
		pids := countIn(homeDirs(r.gws))
		bad = nil
		for i, g := range r.gws {
			code, body := g.adminSend(r.t, http.MethodGet, "/admin/homes/"+fiHome, "")
			var h struct {
				Status string `json:"status"`
			}
			if code != http.StatusOK || json.Unmarshal([]byte(body), &h) != nil {
				bad = append(bad, fmt.Sprintf("gw-%d: %d %s", i, code, body))
				continue
			}
			if running := h.Status == "running"; running != (len(pids) == 1) {
				bad = append(bad, fmt.Sprintf("gw-%d says %s with processes %v", i, h.Status, pids))
			}
		}
		return len(bad) == 0
	}) {
		r.t.Fatalf("the admin API disagrees with the processes that exist: %v", bad)
	}
}

func TestFleetFaultSchedule(t *testing.T) {
	long := os.Getenv("WAKEGATE_FAULTS") == "long"
	srv := registrytest.StartVolatileRedis(t)
	r := &faultRun{t: t, srv: srv, paused: make([]atomic.Bool, 3), faulted: make([]atomic.Int64, 3)}
	urls := make([]string, 3)
	for i := range urls {
		r.relays = append(r.relays, startRelay(t, srv.Addr()))
		urls[i] = "redis://" + r.relays[i].addr() + "/0"
	}
	r.gws = fleetConfigsVia(t, urls, fiOptions{admin: true, boot: "1s", args: []string{"--request-log", requestLog},
		wake: map[string]any{"idle_timeout": "0s", "warm_ttl": "1s", "retry_after": "1s"}})
	started := time.Now()
	if i, out := startTogether(t, r.gws); i >= 0 {
		t.Fatalf("gw-%d exited while the fleet started together:\n%s", i, out)
	}
	r.faults++ // gateways started together
	r.samp = sampleHome(r.gws, fiHome)
	defer r.samp.stop()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range r.gws {
		wg.Add(1)
		go r.drive(i, stop, &wg)
	}
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()

	rounds := 1
	if long {
		rounds = 3
	}
	for round := range rounds {
		r.pauseRunner(2 * heartbeatTTL)
		r.suspendThrough(round % 3)
		r.freezeRunnerLink(2*heartbeatTTL, false)
		r.suspendThrough((round + 1) % 3)
		r.restartRedisEmpty()
		r.pauseRunner(5 * heartbeatTTL)
		r.idleRace(6)
		r.killMidColdWake()
		r.pauseRedis(3 * time.Second)
	}

	close(stop)
	wg.Wait()
	r.samp.stop()
	dirs := homeDirs(r.gws)
	windows, forwards := checkNoForwardToStopping(t, append(r.logs, outputs(r.gws)...), dirs)
	r.adminAgrees()
	samples, most, two, _ := r.samp.report()
	t.Logf("fault schedule (%s): %d faults, %d requests (%d answered 200), %d samples of the home's processes, at most %d at once, "+
		"worst time to heal after a fault ended %s, longest a live gateway went without serving the home %s (%s), suspends checked %d, forwards to a stopping home %d, %s in all",
		map[bool]string{false: "short", true: "long"}[long], r.faults, r.requests.Load(), r.ok.Load(), samples, most,
		r.worstHeal.Round(10*time.Millisecond), r.maxGap.Round(10*time.Millisecond), r.gapAt, windows, len(forwards), time.Since(started).Round(time.Second))
	if len(forwards) > 0 {
		t.Fatalf("%d requests reached the home's process after the fleet confirmed its stop: %v", len(forwards), forwards)
	}
	if r.maxGap > faultHeal {
		t.Fatalf("a live gateway went %s without serving the home (%s), want at most the heartbeat TTL plus one wake (%s)", r.maxGap, r.gapAt, faultHeal)
	}
	if most > 1 {
		t.Fatalf("two processes of the home at one sample: %v", two)
	}
	if n := r.noRetry.Load(); n > 0 {
		t.Fatalf("%d answers 5xx without Retry-After; first: %s", n, *r.firstNoRet.Load())
	}
}

// outputs is what every gateway printed in its current run.
func outputs(gws []*fiGateway) []string {
	out := make([]string, len(gws))
	for i, g := range gws {
		out[i] = g.Output()
	}
	return out
}
