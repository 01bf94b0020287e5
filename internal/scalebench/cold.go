package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// coldResult is one stampede on cold homes.
type coldResult struct {
	wakes    float64 // wakes the gateway counted
	p50, p99 float64 // time to the answer, ms
	max      float64
	cpuPer   float64 // the gateway's CPU per caller, µs
	homeCPU  float64 // the home's CPU per caller, µs
	client   float64 // the load generator's CPU per caller, µs
	sent     float64 // time to the first request written whole, ms
	first    float64 // time to the first byte of the first answer, ms
	began    float64 // time to the start of the home's process that answered first, ms; 0 if unknown
	wakeMs   float64 // the gateway's mean wake time (start to ready), ms
	failed   int
	failure  string         // the first failure
	byKind   map[string]int // the failures by kind (failureKind)
}

// stats are the medians of stampede rounds.
type stats struct{ p50, p99, max, sent, first, began, wakes, cpu, wakeMs, homeCPU, client []float64 }

func (s *stats) add(r coldResult) {
	s.p50, s.p99, s.max, s.wakes = append(s.p50, r.p50), append(s.p99, r.p99), append(s.max, r.max), append(s.wakes, r.wakes)
	s.cpu, s.homeCPU, s.client = append(s.cpu, r.cpuPer), append(s.homeCPU, r.homeCPU), append(s.client, r.client)
	s.sent, s.first = append(s.sent, r.sent), append(s.first, r.first)
	if r.began > 0 { // a process that began after the stampede started: a cold start
		s.began = append(s.began, r.began-r.sent)
	}
	if r.wakes > 0 {
		s.wakeMs = append(s.wakeMs, r.wakeMs)
	}
}

func (s *stats) String() string {
	wake := ""
	if len(s.wakeMs) > 0 {
		wake = fmt.Sprintf(", each wake %.0f ms", median(s.wakeMs))
	}
	return fmt.Sprintf("wakes %.0f%s, %s, p50 %.0f ms, p99 %.0f ms, max %.0f ms, gateway CPU %.0f µs/caller, home %.0f, load generator %.0f (medians of %d rounds)",
		median(s.wakes), wake, s.firsts(), median(s.p50), median(s.p99), median(s.max), median(s.cpu), median(s.homeCPU), median(s.client), len(s.p99))
}

// firsts is when the first request went and the first answer came,
// medians, from the start of the stampede, and, where the answer said
// when its process began (a cold demo home's /whoami), how long after the
// first request that process began: the time the gateway, or the floor's
// start, took to start the home, apart from the home's own boot.
func (s *stats) firsts() string {
	out := fmt.Sprintf("first answer %.1f ms", median(s.first))
	if m := median(s.sent); m > 0 {
		out = fmt.Sprintf("first request sent %.1f ms, %s", m, out)
	}
	if len(s.began) > 0 {
		out += fmt.Sprintf(", its home's process began %.2f ms after the first request", median(s.began))
	}
	return out
}

// runCold measures stampedes on cold homes: -cold-callers at once on one
// home (rounds, on each variant of the gateway, with the floor), then
// spread over -cold-homes homes with each wake cap (rounds; none with
// -cold-homes 0).
func runCold(ctx context.Context, o options, t *table) error {
	caps, err := intList("-caps", o.caps, 1)
	if err != nil {
		return err
	}
	if o.coldHomes < 0 {
		return fmt.Errorf("-cold-homes %d: want 0 (no spread run) or more", o.coldHomes)
	}
	if err := oneHome(ctx, o, t); err != nil {
		return err
	}
	if o.coldHomes == 0 {
		return nil
	}
	return spreadRuns(ctx, o, t, caps)
}

// intList parses a flag's comma-separated list of numbers of at least least.
func intList(flag, s string, least int) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < least {
			return nil, fmt.Errorf("%s: want numbers of at least %d such as 16,128, got %q", flag, least, s)
		}
		out = append(out, n)
	}
	return out, nil
}

// coldWake is the wake section of the cold gateways, with wake cap c. Its
// ready timeout is no longer than proxy.home_response_header_timeout
// (30s), so that callers of a socket-activated home go to it as soon as
// its process is started.
func coldWake(c int) string {
	return fmt.Sprintf("wake: {idle_timeout: 0s, ready_timeout: 30s, wake_timeout: 120s, max_concurrent: %d}", c)
}

// coldGateway starts a gateway of binary bin with the extra config and
// homes exec demo homes registered through the admin API, none woken.
func coldGateway(ctx context.Context, o options, name, bin, extra string, homes int) (*gw, error) {
	g, err := newGateway(o, name, 0, nil, extra)
	if err != nil {
		return nil, err
	}
	g.bin = bin
	// Each stampede comes from -cold-callers new connections at once.
	g.client.Transport.(*http.Transport).MaxIdleConnsPerHost = o.coldCallers
	if _, err := g.start(ctx, o.dir); err != nil {
		return nil, err
	}
	body := []byte(`{"provider":"exec","idle_timeout":"0s"}`)
	err = parallel(ctx, homes, 4, func(i int) error {
		code, b, err := g.adminDo(ctx, http.MethodPut, fmt.Sprintf("/admin/homes/c%05d", i), body)
		if err != nil || (code != http.StatusCreated && code != http.StatusOK) {
			return fmt.Errorf("register c%05d: %d %v %s", i, code, err, b)
		}
		return nil
	})
	if err != nil {
		g.stop()
		return nil, err
	}
	return g, nil
}

// variant is one gateway of the one-home rounds and its results.
type variant struct {
	name       string
	g          *gw
	cold, warm stats
}

// variants starts the gateways the one-home rounds compare: the binary
// under test with each -home-conns value of proxy.max_conns_per_home (its
// default when the flag is empty), and -before-bin when set.
func variants(ctx context.Context, o options) ([]*variant, error) {
	var vs []*variant
	add := func(name, bin, extra string) error {
		g, err := coldGateway(ctx, o, fmt.Sprintf("one%d", len(vs)), bin, coldWake(16)+"\n"+extra, 1)
		if err != nil {
			return err
		}
		vs = append(vs, &variant{name: name, g: g})
		return nil
	}
	var err error
	if o.homeConns == "" {
		err = add("wakegate", o.bin, "")
	} else {
		var ks []int
		if ks, err = intList("-home-conns", o.homeConns, 0); err == nil {
			for _, k := range ks {
				if err = add(fmt.Sprintf("wakegate, max_conns_per_home %d", k), o.bin,
					fmt.Sprintf("proxy: {max_conns_per_home: %d}", k)); err != nil {
					break
				}
			}
		}
	}
	if err == nil && o.beforeBin != "" {
		err = add("wakegate before ("+filepath.Base(o.beforeBin)+")", o.beforeBin, "")
	}
	if err != nil {
		for _, v := range vs {
			v.g.stop()
		}
		return nil, err
	}
	return vs, nil
}

// oneHome runs the rounds on one home: in each, on every variant in turn
// (the order rotates), the cold stampede, then the same on the home awake;
// then the floor on the first variant's home while it is awake.
func oneHome(ctx context.Context, o options, t *table) error {
	vs, err := variants(ctx, o)
	if err != nil {
		return err
	}
	defer func() {
		for _, v := range vs {
			v.g.stop()
		}
	}()
	fl := floor{o: o}
	for r := range o.coldRounds {
		for i := range vs {
			v := vs[(i+r)%len(vs)]
			if err := v.round(ctx, o, r); err != nil {
				return err
			}
			// The same stampede without wakegate (coldfloor.go), on the
			// home of the first variant, awake now.
			if v == vs[0] {
				if err := fl.measure(ctx, v.g, r); err != nil {
					return err
				}
			}
			if err := suspendAll(ctx, v.g, 1); err != nil {
				return err
			}
		}
	}
	for _, v := range vs {
		t.add(fmt.Sprintf("%s: cold, %d callers on one home (boot %s)", v.name, o.coldCallers, o.boot), "%s", v.cold.String())
		t.add(fmt.Sprintf("%s: warm, the same %d callers on that home awake", v.name, o.coldCallers), "%s", v.warm.String())
	}
	fl.rows(t)
	return nil
}

// round is one cold stampede on v's home and the same on it awake.
func (v *variant) round(ctx context.Context, o options, r int) error {
	res, err := stampede(ctx, o, v.g, 1)
	if err != nil {
		return err
	}
	if res.failed > 0 {
		return fmt.Errorf("%s: one-home stampede: %d of %d failed, first: %s", v.name, res.failed, o.coldCallers, res.failure)
	}
	v.cold.add(res)
	// The same stampede on the home now awake: what the burst costs
	// without the wake.
	wres, err := stampede(ctx, o, v.g, 1)
	if err != nil {
		return err
	}
	v.warm.add(wres)
	logf("%s: one-home stampede %d: wakes %.0f (%.0f ms) p50 %.0f ms p99 %.0f ms max %.0f ms, CPU %.0f µs/caller; warm: p99 %.0f ms, CPU %.0f µs/caller",
		v.name, r+1, res.wakes, res.wakeMs, res.p50, res.p99, res.max, res.cpuPer, wres.p99, wres.cpuPer)
	return nil
}

// spreadRuns runs -cold-callers over -cold-homes cold homes, on a gateway
// of each wake cap (and of -before-bin with each, when set), all started
// at once, in -cold-rounds rounds of rotating order.
func spreadRuns(ctx context.Context, o options, t *table, caps []int) error {
	type spreadGW struct {
		name   string
		c      int
		g      *gw
		st     stats
		failed int
		first  string
	}
	var gs []*spreadGW
	defer func() {
		for _, s := range gs {
			s.g.stop()
		}
	}()
	for _, c := range caps {
		bins := map[string]string{"wakegate": o.bin}
		names := []string{"wakegate"}
		if o.beforeBin != "" {
			n := "wakegate before (" + filepath.Base(o.beforeBin) + ")"
			bins[n], names = o.beforeBin, append(names, n)
		}
		for _, n := range names {
			g, err := coldGateway(ctx, o, fmt.Sprintf("spread%d", len(gs)), bins[n], coldWake(c), o.coldHomes)
			if err != nil {
				return err
			}
			gs = append(gs, &spreadGW{name: n, c: c, g: g})
		}
	}
	for r := range o.coldRounds {
		for i := range gs {
			s := gs[(i+r)%len(gs)]
			res, err := stampede(ctx, o, s.g, o.coldHomes)
			if err != nil {
				return err
			}
			s.st.add(res)
			if s.failed += res.failed; s.first == "" {
				s.first = res.failure
			}
			logf("%s: spread stampede %d, wake cap %d: wakes %.0f p50 %.0f ms p99 %.0f ms, %d failed",
				s.name, r+1, s.c, res.wakes, res.p50, res.p99, res.failed)
			if err := suspendAll(ctx, s.g, o.coldHomes); err != nil {
				return err
			}
		}
	}
	for _, s := range gs {
		t.add(fmt.Sprintf("%s: cold, %d callers over %d homes, wake cap %d", s.name, o.coldCallers, o.coldHomes, s.c),
			"%s; %d failed %s", s.st.String(), s.failed, s.first)
	}
	return nil
}

// stampede sends -cold-callers requests at once, each on a new
// connection, to homes c00000.. in turn through g, and reports the wakes
// the gateway counted and its CPU per caller.
func stampede(ctx context.Context, o options, g *gw, homes int) (coldResult, error) {
	callers := o.coldCallers
	m0, err := g.metrics(ctx)
	if err != nil {
		return coldResult{}, err
	}
	cpu0, err := g.cpu()
	if err != nil {
		return coldResult{}, err
	}
	home0 := childrenCPU(g.cmd.Process.Pid)
	res := burst(o.client, callers, func(i int) string { return fmt.Sprintf("http://%s/node/c%05d/whoami", g.addr, i%homes) }, nil)
	cpu1, err := g.cpu()
	if err != nil {
		return coldResult{}, err
	}
	res.cpuPer = float64((cpu1 - cpu0).Microseconds()) / float64(callers)
	res.homeCPU = perCaller(childrenCPU(g.cmd.Process.Pid).since(home0), callers)
	m1, err := g.metrics(ctx)
	if err != nil {
		return coldResult{}, err
	}
	res.wakes = m1["wakegate_wakes_total"] - m0["wakegate_wakes_total"]
	if res.wakes > 0 {
		const total = `wakegate_wake_seconds_sum{phase="total"}`
		res.wakeMs = (m1[total] - m0[total]) / res.wakes * 1000
	}
	return res, nil
}

// burst sends callers GET requests at once to url(i), with the client
// named by -client, and returns the latency percentiles and failures.
// With "raw" and "transport" each caller dials its own connection at the
// start, and its time counts from before the dial. With "open" every
// caller's connection is made first, with the load generator's dials all
// done before the start; at the start each writes its request, and its
// time counts from there.
//
// onFirst, when not nil, runs once the first request has been written
// (with "transport", at the start): what a gateway's wake could start
// on at the earliest. When it fails, every caller's connection is closed
// and the burst fails with its error.
func burst(client string, callers int, url func(i int) string, onFirst func() error) coldResult {
	var res coldResult
	var mu sync.Mutex
	var live []*rawConn // the raw clients' connections, closed when onFirst fails
	hookFailed := false
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		res.failed++
		if res.byKind == nil {
			res.byKind = map[string]int{}
		}
		res.byKind[failureKind(err)]++
		if res.failure == "" {
			res.failure = err.Error()
		}
	}
	enlist := func(rc *rawConn) bool {
		mu.Lock()
		defer mu.Unlock()
		live = append(live, rc)
		return !hookFailed
	}
	sent := make(chan struct{})
	var sentOnce sync.Once
	markSent := func() { sentOnce.Do(func() { close(sent) }) }

	get := func(i int) (timing, error) { return transportGet(url(i)) }
	switch client {
	case "raw":
		get = func(i int) (timing, error) {
			rc, err := dialRaw(url(i))
			if err != nil {
				return timing{}, err
			}
			if !enlist(rc) {
				_ = rc.c.Close()
				return timing{}, errors.New("the stampede was called off")
			}
			return rc.exchange(markSent)
		}
	case "open":
		conns := make([]*rawConn, callers)
		var dials sync.WaitGroup
		sem := make(chan struct{}, 64)
		for i := range callers {
			dials.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				rc, err := dialRaw(url(i))
				if err != nil {
					fail(err)
					return
				}
				conns[i] = rc
				enlist(rc)
			})
		}
		dials.Wait()
		if res.failed > 0 {
			for _, rc := range live {
				_ = rc.c.Close()
			}
			return res
		}
		get = func(i int) (timing, error) { return conns[i].exchange(markSent) }
	}

	lat := make([]float64, callers)
	times := make([]timing, callers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			<-start
			t0 := time.Now()
			t, err := get(i)
			times[i] = t
			if client == "open" && !t.sent.IsZero() {
				t0 = t.sent
			}
			lat[i] = float64(time.Since(t0).Microseconds()) / 1000
			if err != nil {
				fail(err)
			}
		})
	}
	var hook sync.WaitGroup
	var hookErr error // read after hook.Wait
	if onFirst != nil {
		if client == "transport" {
			markSent()
		}
		hook.Go(func() {
			<-sent
			if err := onFirst(); err != nil {
				mu.Lock()
				hookFailed = true
				for _, rc := range live {
					_ = rc.c.Close()
				}
				mu.Unlock()
				hookErr = err
			}
		})
	}
	self0, t0 := selfCPU(), time.Now()
	close(start)
	wg.Wait()
	markSent() // no request went: the hook still ends
	hook.Wait()
	if hookErr != nil {
		res.failed, res.failure = callers, hookErr.Error()
	}
	res.client = perCaller(selfCPU()-self0, callers)
	res.sent = earliest(t0, times, func(t timing) time.Time { return t.sent })
	res.first = earliest(t0, times, func(t timing) time.Time { return t.first })
	res.began = earliest(t0, times, func(t timing) time.Time { return t.began })
	res.p50, res.p99, res.max = percentile(lat, 50), percentile(lat, 99), percentile(lat, 100)
	return res
}

// earliest is the earliest of the times at(t) that are set, in ms after
// t0; 0 when none is.
func earliest(t0 time.Time, ts []timing, at func(timing) time.Time) float64 {
	var best time.Time
	for _, t := range ts {
		if a := at(t); !a.IsZero() && (best.IsZero() || a.Before(best)) {
			best = a
		}
	}
	if best.IsZero() {
		return 0
	}
	return float64(best.Sub(t0).Microseconds()) / 1000
}

// transportGet fetches u with an http.Client of its own, on a new
// connection, and reads the whole answer. Its timing has the time the
// answer's head came, as the first byte's.
func transportGet(u string) (t timing, err error) {
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 2 * time.Minute}
	r, err := c.Get(u)
	if err != nil {
		return t, err
	}
	t.first = time.Now()
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	r.Body.Close()
	t.began = beganOf(body)
	if r.StatusCode != http.StatusOK {
		return t, fmt.Errorf("status %d", r.StatusCode)
	}
	return t, nil
}

// suspendAll suspends homes c00000.. so that the next run finds them cold.
// A home whose callers were answered while its wake still runs (they go
// to a socket-activated home at its start, before the probe has passed)
// is busy until the wake ends: its suspend is asked again, for up to 10s.
func suspendAll(ctx context.Context, g *gw, homes int) error {
	return parallel(ctx, homes, 8, func(i int) error {
		for try := 0; ; try++ {
			code, b, err := g.adminDo(ctx, http.MethodPost, fmt.Sprintf("/admin/homes/c%05d/suspend", i), nil)
			if err == nil && code == http.StatusConflict && try < 100 {
				select {
				case <-time.After(100 * time.Millisecond):
					continue
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			if err != nil || code != http.StatusOK {
				return fmt.Errorf("suspend c%05d: %d %v %s", i, code, err, b)
			}
			return nil
		}
	})
}

// failureKind names a caller's failure for a count by kind: the answer's
// status ("status 503"), or what befell the connection.
func failureKind(err error) string {
	s := err.Error()
	var ne net.Error
	switch {
	case strings.HasPrefix(s, "status "):
		return s
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		return "out of file descriptors"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "closed without an answer"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "other (" + s + ")"
}
