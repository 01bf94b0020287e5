package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The storm (-only storm) wakes -storm different cold homes at once, one
// request each: socket-activated exec demo homes booting for -boot,
// registered through the admin API. Its floor is the same homes started
// at once without a gateway (stormFloor). It runs on one gateway with each
// wake cap of -storm-caps, then on -storm-fleet gateways sharing one
// redis-server the bench starts on loopback, the requests spread
// round-robin over them.
// Each storm reports its failures by kind, the time to a 200 (p50, p99,
// max), a single cold wake's time on the same gateway just before (the
// median of -storm-singles wakes of other homes, one at a time) and the
// ratio p99/single, the gateways' CPU per wake, the peak number of home
// processes and of the gateways' open descriptors, and, on the fleet, the
// wakes each gateway ran and how many times each home was started (the
// demo home's "booting" lines in every gateway's home logs).

// stormSingle is the prefix of the homes woken one at a time; the
// storm's homes are c00000...
const stormSingle = "s"

// stormStats is one storm's measurements.
type stormStats struct {
	res       coldResult
	singleMs  float64   // median single cold wake, ms
	cpuPer    float64   // the gateways' CPU per wake, µs
	homeCPU   float64   // the homes' CPU per wake (its start and boot), µs
	perGW     []float64 // each gateway's CPU per wake it ran, µs
	coldWakes []float64 // each gateway's cold wakes
	waited    []float64 // each gateway's waits on another gateway's wake
	peakHomes int       // home processes at once, at most
	peakFDs   int       // the gateways' open descriptors, summed, at most
	starts    map[int]int
}

// runStorm runs the storms: one gateway per wake cap, then the fleet.
func runStorm(ctx context.Context, o options, t *table) error {
	if o.storm < 1 {
		return fmt.Errorf("-storm %d: want at least 1", o.storm)
	}
	if o.stormSingles < 1 {
		return fmt.Errorf("-storm-singles %d: want at least 1", o.stormSingles)
	}
	raiseNofile(o.storm)
	caps := []int{16, o.storm}
	if o.stormCaps != "" {
		var err error
		if caps, err = intList("-storm-caps", o.stormCaps, 1); err != nil {
			return err
		}
	}
	so := o
	so.activate = true
	so.coldCallers = o.storm
	floorP99, err := stormFloor(ctx, so, t)
	if err != nil {
		return err
	}
	for i, c := range caps {
		st, err := stormOnce(ctx, so, fmt.Sprintf("storm%d", i), c, nil)
		if err != nil {
			return err
		}
		stormRows(t, so, fmt.Sprintf("one gateway, wake cap %d", c), st, floorP99)
	}
	if o.stormFleet < 1 {
		return nil
	}
	rd, err := startRedis(ctx, o.dir)
	if err != nil {
		return err
	}
	defer rd.stop()
	c := caps[len(caps)-1]
	st, err := stormOnce(ctx, so, "fleet", c, rd)
	if err != nil {
		return err
	}
	stormRows(t, so, fmt.Sprintf("%d gateways on one Redis, wake cap %d each", o.stormFleet, c), st, floorP99)
	return nil
}

// raiseNofile raises this process's open-file limit to its hard limit (a
// storm of n holds n client connections) and says what the gateway will
// need; the gateways raise their own (Go does at start).
func raiseNofile(n int) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		logf("storm: RLIMIT_NOFILE: %v", err)
		return
	}
	if r.Cur < r.Max {
		r.Cur = r.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
			logf("storm: raise RLIMIT_NOFILE to %d: %v", r.Max, err)
		}
	}
	logf("storm: open files limit %d (hard %d); the bench holds about %d descriptors, each gateway a few per wake in flight (the peak is reported)", r.Cur, r.Max, n+64)
	if r.Max < uint64(4*n+256) {
		logf("storm: the hard open-files limit %d may be short for %d wakes at once: raise it (ulimit -Hn, LimitNOFILE=)", r.Max, n)
	}
}

// stormOnce starts the storm's gateways (one, or -storm-fleet on rd),
// registers the homes, wakes the single homes one at a time, then sends
// the storm, and stops everything it started.
func stormOnce(ctx context.Context, o options, name string, wakeCap int, rd *redisProc) (st stormStats, err error) {
	n := 1
	if rd != nil {
		n = o.stormFleet
	}
	var gws []*gw
	defer func() { stopStorm(gws) }()
	for i := range n {
		extra := coldWake(wakeCap)
		if rd != nil {
			extra = fmt.Sprintf("instance: %s-%d\nredis: {url: %q, prefix: storm}\n%s", name, i, rd.url(), extra)
		}
		g, err := newGateway(o, fmt.Sprintf("%s-%d", name, i), 0, nil, extra)
		if err != nil {
			return st, err
		}
		g.client.Transport.(*http.Transport).MaxIdleConnsPerHost = 64
		gws = append(gws, g)
		if _, err := g.start(ctx, o.dir); err != nil {
			return st, err
		}
	}
	ids := make([]string, 0, o.storm+o.stormSingles)
	for i := range o.storm {
		ids = append(ids, fmt.Sprintf("c%05d", i))
	}
	for i := range o.stormSingles {
		ids = append(ids, fmt.Sprintf("%s%05d", stormSingle, i))
	}
	t0 := time.Now()
	if err := registerExec(ctx, gws[0], ids, 8); err != nil {
		return st, err
	}
	// The other gateways of a fleet learn the homes from the store.
	for _, g := range gws[1:] {
		if err := awaitHome(ctx, g, ids[len(ids)-1]); err != nil {
			return st, err
		}
	}
	logf("%s: %d homes registered in %.1f s", name, len(ids), time.Since(t0).Seconds())

	// One cold wake at a time, through each gateway in turn.
	mStart := make([]map[string]float64, len(gws))
	for i, g := range gws {
		if mStart[i], err = g.metrics(ctx); err != nil {
			return st, err
		}
	}
	var singles []float64
	for i := range o.stormSingles {
		g := gws[i%len(gws)]
		r := burst("raw", 1, func(int) string {
			return fmt.Sprintf("http://%s/node/%s%05d/whoami", g.addr, stormSingle, i)
		}, nil)
		if r.failed > 0 {
			return st, fmt.Errorf("%s: single cold wake %d: %s", name, i, r.failure)
		}
		singles = append(singles, r.p50)
	}
	st.singleMs = median(singles)
	logf("%s: single cold wakes %v ms, median %.0f", name, roundAll(singles), st.singleMs)

	// Their wakes end before the storm starts.
	m0, err := settled(ctx, gws, mStart, o.stormSingles)
	if err != nil {
		return st, err
	}
	cpu0 := make([]time.Duration, len(gws))
	homes0 := make([]cpuByPID, len(gws))
	for i, g := range gws {
		if cpu0[i], err = g.cpu(); err != nil {
			return st, err
		}
		homes0[i] = childrenCPU(g.cmd.Process.Pid)
	}
	stopWatch := make(chan struct{})
	var watch sync.WaitGroup
	watch.Go(func() { st.peakHomes, st.peakFDs = peaks(gws, stopWatch) })
	st.res = burst("raw", o.storm, func(i int) string {
		return fmt.Sprintf("http://%s/node/c%05d/whoami", gws[i%len(gws)].addr, i)
	}, nil)
	// The callers of a socket-activated home are answered before its
	// probe passes: the wakes are counted, and their cost measured, once
	// they have all ended.
	ms, err := settled(ctx, gws, m0, o.storm)
	close(stopWatch)
	watch.Wait()
	if err != nil {
		return st, err
	}
	var cpuAll, homesUsed time.Duration
	for i, g := range gws {
		c, err := g.cpu()
		if err != nil {
			return st, err
		}
		m := ms[i]
		cold := labelled(m, "wakegate_wakes_total", `cause="cold"`) - labelled(m0[i], "wakegate_wakes_total", `cause="cold"`)
		waited := labelled(m, "wakegate_wakes_total", `cause="waited"`) - labelled(m0[i], "wakegate_wakes_total", `cause="waited"`)
		used := c - cpu0[i]
		cpuAll += used
		homesUsed += childrenCPU(g.cmd.Process.Pid).since(homes0[i])
		st.coldWakes, st.waited = append(st.coldWakes, cold), append(st.waited, waited)
		st.perGW = append(st.perGW, perCaller(used, max(int(cold), 1)))
	}
	st.cpuPer = perCaller(cpuAll, o.storm)
	st.homeCPU = perCaller(homesUsed, o.storm)
	st.starts = homeStarts(gws, o.storm)
	logf("%s: storm of %d: p50 %.0f ms p99 %.0f ms max %.0f ms, %d failed %v", name, o.storm, st.res.p50, st.res.p99, st.res.max, st.res.failed, st.res.byKind)
	return st, nil
}

// stormFloor is the storm without a gateway: -storm demo homes, each on
// a listening socket made before it (--listen-fd), all started at once
// the moment the first request is out, one request each. Its time is the
// machine's: starting and booting that many processes beside the load
// generator, with a wake that costs nothing else.
func stormFloor(ctx context.Context, o options, t *table) (p99 float64, err error) {
	n := o.storm
	addrs := make([]string, n)
	cmds := make([]*exec.Cmd, n)
	files := make([]*os.File, n)
	defer func() {
		for i, c := range cmds {
			if c != nil && c.Process != nil {
				_ = c.Process.Signal(syscall.SIGTERM)
				_ = c.Wait()
			}
			if files[i] != nil {
				_ = files[i].Close()
			}
		}
	}()
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("storm floor: home's socket: %w", err)
		}
		addrs[i] = ln.Addr().String()
		files[i], err = ln.(*net.TCPListener).File()
		_ = ln.Close() // the file keeps the socket listening
		if err != nil {
			return 0, fmt.Errorf("storm floor: home's socket: %w", err)
		}
		c := exec.CommandContext(ctx, o.bin, "demo-home", "--listen-fd", "3", "--target", fmt.Sprintf("c%05d", i),
			"--boot-delay", o.boot.String())
		c.ExtraFiles = []*os.File{files[i]}
		c.SysProcAttr = diesWithBench()
		cmds[i] = c
	}
	startAll := func() error {
		return parallel(ctx, n, 64, func(i int) error {
			if err := cmds[i].Start(); err != nil {
				return fmt.Errorf("storm floor: start home %d: %w", i, err)
			}
			_ = files[i].Close() // the home has it now
			files[i] = nil
			return nil
		})
	}
	res := burst("raw", n, func(i int) string { return "http://" + addrs[i] + fmt.Sprintf("/node/c%05d/whoami", i) }, startAll)
	var homes time.Duration
	for _, c := range cmds {
		if c.Process != nil {
			homes += taskCPU(c.Process.Pid)
		}
	}
	if res.failed > 0 {
		return 0, fmt.Errorf("storm floor: %d of %d failed, first: %s", res.failed, n, res.failure)
	}
	t.add(fmt.Sprintf("storm floor, no gateway: %d demo homes (boot %s) started at once, one request each", n, o.boot),
		"p50 %.0f ms, p99 %.0f ms, max %.0f ms; each home's start and boot %.0f µs; load generator %.0f µs/caller",
		res.p50, res.p99, res.max, perCaller(homes, n), res.client)
	return res.p99, nil
}

// stormRows adds one storm's rows to t.
func stormRows(t *table, o options, what string, st stormStats, floorP99 float64) {
	head := fmt.Sprintf("storm, %s: %d homes at once (boot %s)", what, o.storm, o.boot)
	fails := "no failure"
	if st.res.failed > 0 {
		var ks []string
		for k, n := range st.res.byKind {
			ks = append(ks, fmt.Sprintf("%d %s", n, k))
		}
		sort.Strings(ks)
		fails = fmt.Sprintf("%d failed (%s)", st.res.failed, strings.Join(ks, ", "))
	}
	ratio := 0.0
	if st.singleMs > 0 {
		ratio = st.res.p99 / st.singleMs
	}
	t.add(head, "%s; p50 %.0f ms, p99 %.0f ms, max %.0f ms; single cold wake %.0f ms (median of %d); p99/single %.2f; p99/floor's %.2f",
		fails, st.res.p50, st.res.p99, st.res.max, st.singleMs, o.stormSingles, ratio, st.res.p99/floorP99)
	t.add(head+", cost", "gateway CPU %.0f µs per wake (every gateway's CPU from the storm's start to its last wake's end / %d); each home's start and boot %.0f µs; load generator %.0f µs/caller; peak home processes %d; peak gateway descriptors %d",
		st.cpuPer, o.storm, st.homeCPU, st.res.client, st.peakHomes, st.peakFDs)
	once, more, never := 0, 0, 0
	for i := range o.storm {
		switch st.starts[i] {
		case 0:
			never++
		case 1:
			once++
		default:
			more++
		}
	}
	var per []string
	for i := range st.coldWakes {
		per = append(per, fmt.Sprintf("%.0f (waited on another's %.0f, CPU %.0f µs/wake)", st.coldWakes[i], st.waited[i], st.perGW[i]))
	}
	t.add(head+", starts", "cold wakes per gateway: %s; homes started once %d, more than once %d, never %d",
		strings.Join(per, "; "), once, more, never)
}

// settled waits until the gateways gws have finished n wakes since m0
// (their metrics before), for up to 60 s, and returns their metrics.
func settled(ctx context.Context, gws []*gw, m0 []map[string]float64, n int) ([]map[string]float64, error) {
	ms := make([]map[string]float64, len(gws))
	for range 600 {
		done := 0.0
		for i, g := range gws {
			m, err := g.metrics(ctx)
			if err != nil {
				return nil, err
			}
			ms[i] = m
			done += labelled(m, "wakegate_wakes_total", `cause="cold"`) - labelled(m0[i], "wakegate_wakes_total", `cause="cold"`)
		}
		if done >= float64(n) {
			return ms, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	logf("storm: the gateways counted fewer than %d cold wakes 60 s after the storm", n)
	return ms, nil
}

// labelled sums the samples of metric name whose labels hold label.
func labelled(m map[string]float64, name, label string) float64 {
	var s float64
	for k, v := range m {
		if strings.HasPrefix(k, name+"{") && strings.Contains(k, label) {
			s += v
		}
	}
	return s
}

// registerExec registers exec homes ids through g's admin API, workers at
// once, none woken.
func registerExec(ctx context.Context, g *gw, ids []string, workers int) error {
	body := []byte(`{"provider":"exec","idle_timeout":"0s"}`)
	return parallel(ctx, len(ids), workers, func(i int) error {
		code, b, err := g.adminDo(ctx, http.MethodPut, "/admin/homes/"+ids[i], body)
		if err != nil || (code != http.StatusCreated && code != http.StatusOK) {
			return fmt.Errorf("register %s: %d %v %s", ids[i], code, err, b)
		}
		return nil
	})
}

// awaitHome waits until g's admin API knows home id (a fleet gateway
// learns a home registered on another from the store), for up to 30 s.
func awaitHome(ctx context.Context, g *gw, id string) error {
	for range 300 {
		code, _, err := g.adminDo(ctx, http.MethodGet, "/admin/homes/"+id, nil)
		if err == nil && code == http.StatusOK {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s does not know home %s 30 s after its registration on another gateway", g.name, id)
}

// peaks samples the home processes (the gateways' children) and the
// gateways' open descriptors every 50 ms until stop closes, and returns
// the highest of each.
func peaks(gws []*gw, stop <-chan struct{}) (homes, fds int) {
	for {
		h, f := 0, 0
		for _, g := range gws {
			h += len(children(g.cmd.Process.Pid))
			if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", g.cmd.Process.Pid)); err == nil {
				f += len(ents)
			}
		}
		homes, fds = max(homes, h), max(fds, f)
		select {
		case <-stop:
			return homes, fds
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// homeStarts counts the starts of storm home c<i> in every gateway's home
// logs: one "booting" line of the demo home per start.
func homeStarts(gws []*gw, n int) map[int]int {
	out := map[int]int{}
	for _, g := range gws {
		logs, _ := filepath.Glob(filepath.Join(filepath.Dir(g.cfg), "data", "*", "c*", "home.log*"))
		for _, p := range logs {
			var i int
			if _, err := fmt.Sscanf(filepath.Base(filepath.Dir(p)), "c%05d", &i); err != nil || i >= n {
				continue
			}
			f, err := os.Open(p)
			if err != nil {
				continue
			}
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if strings.Contains(sc.Text(), "booting delay=") {
					out[i]++
				}
			}
			_ = f.Close()
		}
	}
	return out
}

// stopStorm ends the storm's homes (SIGTERM to each gateway's children:
// quicker than a thousand suspends) and then its gateways.
func stopStorm(gws []*gw) {
	for _, g := range gws {
		if g.cmd == nil || g.cmd.Process == nil {
			continue
		}
		for _, pid := range children(g.cmd.Process.Pid) {
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
	}
	for _, g := range gws {
		g.stop()
	}
}

// roundAll rounds xs to whole numbers, for the log.
func roundAll(xs []float64) []int {
	out := make([]int, len(xs))
	for i, x := range xs {
		out[i] = int(x + 0.5)
	}
	return out
}

// redisProc is the fleet storm's redis-server on loopback, without
// persistence.
type redisProc struct {
	addr string
	cmd  *exec.Cmd
}

func (r *redisProc) url() string { return "redis://" + r.addr + "/0" }

// startRedis runs redis-server on a free loopback port with its files
// under dir and waits until it answers PING.
func startRedis(ctx context.Context, dir string) (*redisProc, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("the fleet storm needs redis-server on PATH (-storm-fleet 0 skips it): %w", err)
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	d := filepath.Join(dir, "redis")
	if err := os.MkdirAll(d, 0o700); err != nil {
		return nil, fmt.Errorf("redis dir: %w", err)
	}
	r := &redisProc{addr: addr}
	r.cmd = exec.Command(bin, "--bind", "127.0.0.1", "--port", port, "--dir", d,
		"--save", "", "--appendonly", "no", "--maxclients", "10000")
	r.cmd.SysProcAttr = diesWithBench()
	logFile, err := os.Create(filepath.Join(d, "out.log"))
	if err != nil {
		return nil, fmt.Errorf("redis log: %w", err)
	}
	defer logFile.Close()
	r.cmd.Stdout, r.cmd.Stderr = logFile, logFile
	if err := r.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	for range 500 {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_, _ = c.Write([]byte("PING\r\n"))
			_ = c.SetReadDeadline(time.Now().Add(time.Second))
			line, _ := bufio.NewReader(c).ReadString('\n')
			_ = c.Close()
			if strings.HasPrefix(line, "+PONG") {
				return r, nil
			}
		}
		select {
		case <-ctx.Done():
			r.stop()
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	r.stop()
	return nil, fmt.Errorf("redis-server did not answer PING within 5 s; see %s", logFile.Name())
}

// stop ends redis-server and waits for it.
func (r *redisProc) stop() {
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	_ = r.cmd.Wait()
}
