package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// newGateway writes the config of a gateway named name in its own
// directory under dir: always-on (static) homes a00000.. spread over
// backends, an admin listener, and wake settings that keep verdicts for
// the whole run (the warm path is measured, not the re-probe).
// listenArgs are the demo home's flags that say where it listens: its
// own port, or the socket it is handed (-socket-activation).
func listenArgs(o options) string {
	if o.activate {
		return "--listen-fd, 3"
	}
	return `--addr, "127.0.0.1:{port}"`
}

func newGateway(o options, name string, static int, backends []string, extra string) (*gw, error) {
	d := filepath.Join(o.dir, name)
	if err := os.MkdirAll(d, 0o700); err != nil {
		return nil, fmt.Errorf("gateway dir: %w", err)
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	admin, err := freeAddr()
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, `listen: %q
data_dir: %q
log: {level: warn, access: false}
server: {max_conns_per_client: 100000}
admin: {listen: %q, tokens: ["${WAKEGATE_TOKEN}"]}
roll: {mode: "off"}
exec:
  command: [%q, demo-home, %s, --target, "{target}", --version, "{version}", --boot-delay, %q]
  stop_grace: 2s
  socket_activation: %t
  users: {machine_dir: %q}
%s
homes:
`, addr, filepath.Join(d, "data"), admin, o.bin, listenArgs(o), o.boot.String(), o.activate, o.machine, extra)
	for i := range static {
		fmt.Fprintf(&b, "  - {id: a%05d, provider: static, endpoint: %q}\n", i, backends[i%len(backends)])
	}
	if static == 0 {
		b.WriteString("  []\n")
	}
	cfg := filepath.Join(d, "config.yaml")
	if err := os.WriteFile(cfg, []byte(b.String()), 0o600); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 0}
	return &gw{name: name, bin: o.bin, cfg: cfg, addr: addr, admin: admin, data: absPath(filepath.Join(d, "data")), machine: o.machine,
		token: "scalebench-admin-token-0123456789", client: &http.Client{Transport: tr, Timeout: 5 * time.Minute}}, nil
}

// scaleWake is the wake section of the scale gateways.
const scaleWake = `wake: {idle_timeout: 1h, warm_ttl: 1h, ready_timeout: 30s, probe: {kind: http, path: /}}`

func runScale(ctx context.Context, o options, t *table) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	bks, err := backends(ctx, 4)
	if err != nil {
		return err
	}
	small, err := newGateway(o, "small", o.small, bks, scaleWake)
	if err != nil {
		return err
	}
	large, err := newGateway(o, "large", o.awake, bks, scaleWake)
	if err != nil {
		return err
	}
	defer small.stop()
	defer large.stop()
	if _, err := small.start(ctx, o.dir); err != nil {
		return err
	}
	if _, err := large.start(ctx, o.dir); err != nil {
		return err
	}
	if err := wakeAll(ctx, small, o.small, 16); err != nil {
		return err
	}
	heap0, err := large.heapLive(ctx, 5, 300*time.Millisecond)
	if err != nil {
		return err
	}
	if err := wakeAll(ctx, large, o.awake, 64); err != nil {
		return err
	}
	heap1, err := large.heapLive(ctx, 5, 300*time.Millisecond)
	if err != nil {
		return err
	}
	t.add("memory per awake home (Go heap)", "%.1f KiB (%d homes woken)", (heap1-heap0)/float64(o.awake)/1024, o.awake)

	n := o.homes - o.awake
	t0 := time.Now()
	if o.seed {
		if err := seed(ctx, o, large, n); err != nil {
			return err
		}
		t.add("homes stored (-seed)", "%d copies of one registered through the admin API, in %.1f s", n, time.Since(t0).Seconds())
	} else {
		if err := register(ctx, large, n, o.regWorkers); err != nil {
			return err
		}
		regTook := time.Since(t0)
		t.add("admin API registration", "%d homes in %.1f s (%.0f/s, %d at once)", n, regTook.Seconds(), float64(n)/regTook.Seconds(), o.regWorkers)
	}
	heap2, err := large.heapLive(ctx, 8, 500*time.Millisecond)
	if err != nil {
		return err
	}
	t.add("memory per registered home (Go heap)", "%.2f KiB (%d homes registered)", (heap2-heap1)/float64(n)/1024, n)
	if rss, err := large.rss(); err == nil {
		t.add("large gateway RSS", "%.0f MiB with %d homes, %d awake", float64(rss)/(1<<20), o.homes, o.awake)
	}

	if err := idleCPU(ctx, o, t, small, large); err != nil {
		return err
	}
	if err := warmRounds(ctx, o, t, small, large); err != nil {
		return err
	}
	if err := adminLatency(ctx, o, t, large); err != nil {
		return err
	}
	return startTimes(ctx, o, t, large)
}

// runStart measures the start of the large gateway alone: -homes homes
// stored (see -seed), -awake of them always-on.
func runStart(ctx context.Context, o options, t *table) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	bks, err := backends(ctx, 4)
	if err != nil {
		return err
	}
	large, err := newGateway(o, "large", o.awake, bks, scaleWake)
	if err != nil {
		return err
	}
	defer large.stop()
	if _, err := large.start(ctx, o.dir); err != nil {
		return err
	}
	n := o.homes - o.awake
	if o.seed {
		err = seed(ctx, o, large, n)
	} else {
		err = register(ctx, large, n, o.regWorkers)
	}
	if err != nil {
		return err
	}
	return startTimes(ctx, o, t, large)
}

// wakeAll sends one request to each of the first n static homes, at most
// conc at once, and checks each answers 200.
func wakeAll(ctx context.Context, g *gw, n, conc int) error {
	return parallel(ctx, n, conc, func(i int) error {
		res, err := g.client.Get(fmt.Sprintf("http://%s/node/a%05d/", g.addr, i))
		if err != nil {
			return fmt.Errorf("wake a%05d: %w", i, err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("wake a%05d: status %d", i, res.StatusCode)
		}
		return nil
	})
}

// register registers n homes h00000.. through the admin API, workers at
// once. They are exec homes that are never woken.
func register(ctx context.Context, g *gw, n, workers int) error {
	body := []byte(`{"provider":"exec","idle_timeout":"1h","probe":"http"}`)
	var done atomic.Int64
	stopLog := make(chan struct{})
	defer close(stopLog)
	go func() {
		tk := time.NewTicker(10 * time.Second)
		defer tk.Stop()
		for {
			select {
			case <-stopLog:
				return
			case <-tk.C:
				logf("registered %d of %d", done.Load(), n)
			}
		}
	}()
	return parallel(ctx, n, workers, func(i int) error {
		code, b, err := g.adminDo(ctx, http.MethodPut, fmt.Sprintf("/admin/homes/h%06d", i), body)
		if err != nil {
			return fmt.Errorf("register h%06d: %w", i, err)
		}
		if code != http.StatusCreated && code != http.StatusOK {
			return fmt.Errorf("register h%06d: status %d: %s", i, code, b)
		}
		done.Add(1)
		return nil
	})
}

// parallel runs fn(0..n-1), conc at once, and returns the first error.
func parallel(ctx context.Context, n, conc int, fn func(i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
					next.Store(int64(n))
					return
				}
			}
		})
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// idleCPU measures each gateway's CPU with no traffic over the idle
// window, per idle-loop round and as a share of one core.
func idleCPU(ctx context.Context, o options, t *table, gws ...*gw) error {
	type mark struct {
		cpu   time.Duration
		ticks float64
	}
	before := make([]mark, len(gws))
	for i, g := range gws {
		m, err := g.metrics(ctx)
		if err != nil {
			return err
		}
		c, err := g.cpu()
		if err != nil {
			return err
		}
		before[i] = mark{c, m["wakegate_idle_ticks_total"]}
	}
	t0 := time.Now()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(o.idleWindow):
	}
	wall := time.Since(t0)
	for i, g := range gws {
		c, err := g.cpu()
		if err != nil {
			return err
		}
		m, err := g.metrics(ctx)
		if err != nil {
			return err
		}
		ticks := m["wakegate_idle_ticks_total"] - before[i].ticks
		used := c - before[i].cpu
		per := time.Duration(0)
		if ticks > 0 {
			per = time.Duration(float64(used) / ticks)
		}
		t.add("idle CPU, "+g.name+" gateway", "%.2f %% of a core over %.0f s, %.0f idle rounds, %s per round (whole process, 10 ms clock ticks)",
			100*used.Seconds()/wall.Seconds(), wall.Seconds(), ticks, per)
	}
	return nil
}

// adminLatency times GET /admin/homes pages on g: the first page, a page
// deep in the list by cursor, a status filter and a search.
func adminLatency(ctx context.Context, o options, t *table, g *gw) error {
	first := "/admin/homes?limit=100"
	mid := fmt.Sprintf("h%06d", (o.homes-o.awake)/2)
	for _, q := range []struct{ name, path string }{
		{"first page of 100", first},
		{"page of 100 after " + mid + " (cursor)", "/admin/homes?limit=100&cursor=" + cursorAfter(mid)},
		{"status=running, page of 100", "/admin/homes?limit=100&status=running"},
		{"q=h0000, page of 100", "/admin/homes?limit=100&q=h0000"},
	} {
		var ms []float64
		for range 5 {
			t0 := time.Now()
			code, b, err := g.adminDo(ctx, http.MethodGet, q.path, nil)
			if err != nil || code != http.StatusOK {
				return fmt.Errorf("admin list %s: %d %v %s", q.path, code, err, b)
			}
			ms = append(ms, float64(time.Since(t0).Microseconds())/1000)
			var p struct {
				Homes []json.RawMessage `json:"homes"`
			}
			if err := json.Unmarshal(b, &p); err != nil || len(p.Homes) == 0 {
				return fmt.Errorf("admin list %s: %d homes, %v", q.path, len(p.Homes), err)
			}
		}
		t.add("admin list, "+q.name, "%.1f ms median of 5", median(ms))
	}
	return nil
}

// cursorAfter is the admin list's cursor for the page after id.
func cursorAfter(id string) string {
	return url.QueryEscape(base64URL(id))
}

// startTimes restarts g o.starts times and reports the median time from
// exec to /readyz, and the Go heap once started. With -before-bin, that
// binary starts on the same store in turn (base, bin, base, bin...), and
// the ratios bin/base are reported.
func startTimes(ctx context.Context, o options, t *table, g *gw) error {
	type side struct {
		name, bin  string
		secs, heap []float64
		homes      float64
	}
	sides := []*side{{name: "", bin: o.bin}}
	if o.beforeBin != "" {
		sides = []*side{{name: "before", bin: o.beforeBin}, {name: "after", bin: o.bin}}
	}
	defer func() { g.bin = o.bin }()
	for range o.starts {
		for _, s := range sides {
			g.stop()
			g.bin = s.bin
			d, err := g.start(ctx, o.dir)
			if err != nil {
				return err
			}
			h, err := g.heapLive(ctx, 5, 300*time.Millisecond)
			if err != nil {
				return err
			}
			m, err := g.metrics(ctx)
			if err != nil {
				return err
			}
			s.secs, s.heap, s.homes = append(s.secs, d.Seconds()), append(s.heap, h), m["wakegate_homes"]
		}
	}
	for _, s := range sides {
		what := "start with every home stored (exec to /readyz)"
		if s.name != "" {
			what += ", " + s.name
		}
		t.add(what, "%.2f s median of %d (%.0f homes registered after start); Go heap once started %.0f MiB",
			median(s.secs), len(s.secs), s.homes, median(s.heap)/(1<<20))
	}
	if len(sides) == 2 {
		b, n := sides[0], sides[1]
		t.add("start, after/before", "time %.2f×, heap %.2f× (medians)", median(n.secs)/median(b.secs), median(n.heap)/median(b.heap))
	}
	return nil
}

// absPath is p made absolute, or p where that fails.
func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
