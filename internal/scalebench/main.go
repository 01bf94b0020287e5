// Command scalebench measures what wakegate costs as homes grow and what a
// stampede on cold homes costs, on real processes over loopback: the
// wakegate binary under test, real HTTP backends, and real demo homes for
// the cold path. scripts/scale-bench.sh builds and runs it.
//
// The scale part runs two gateways side by side: "small" with a handful of
// always-on (static) homes, and "large" with the same always-on homes, as
// many more awake ones (-awake in all), and enough homes registered
// through the admin API to reach -homes. It reports memory per registered
// and per awake home, the idle loop's CPU, warm-path CPU per request on
// both gateways in alternating rounds (medians; the ratio is the result,
// as the machine may be shared), admin list latency and the start time
// with every home stored.
//
// The cold part sends -cold-callers concurrent requests to one cold home
// (a demo home booting for -boot), then the same number spread over
// -cold-homes cold homes, with each wake cap of -caps. Its floor is the
// same stampede on the awake home itself and through nginx (coldfloor.go);
// -home-conns and -before-bin compare gateways side by side (cold.go).
//
// The storm part wakes -storm different cold homes at once, one request
// each, on one gateway per wake cap and then on three gateways sharing one
// Redis, against the same homes started without a gateway (storm.go).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// options are the command's flags.
type options struct {
	bin          string
	dir          string
	machine      string // the gateways' exec.users.machine_dir
	homes        int
	awake        int
	small        int
	rounds       int
	reqs         int
	conns        int
	idleWindow   time.Duration
	starts       int
	coldCallers  int
	coldHomes    int
	coldRounds   int
	boot         time.Duration
	caps         string
	nginx        string
	homeConns    string
	beforeBin    string
	only         string
	regWorkers   int
	seed         bool
	client       string
	activate     bool
	storm        int
	stormSingles int
	stormCaps    string
	stormFleet   int
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "", "the wakegate binary to measure (required)")
	flag.StringVar(&o.dir, "dir", "", "working directory (default: a new one under /dev/shm, else the temp dir)")
	flag.IntVar(&o.homes, "homes", 100000, "homes registered on the large gateway")
	flag.IntVar(&o.awake, "awake", 1000, "awake homes on the large gateway")
	flag.IntVar(&o.small, "small", 10, "homes of the small gateway (the warm-path baseline)")
	flag.IntVar(&o.rounds, "rounds", 5, "rounds of each warm-path measurement")
	flag.IntVar(&o.reqs, "reqs", 20000, "requests per warm-path round")
	flag.IntVar(&o.conns, "conns", 16, "keep-alive connections of the warm-path load")
	flag.DurationVar(&o.idleWindow, "idle-window", 10*time.Second, "how long the idle loop's CPU is measured")
	flag.IntVar(&o.starts, "starts", 3, "restarts of the large gateway timed")
	flag.IntVar(&o.coldCallers, "cold-callers", 1000, "concurrent requests of the cold-path runs")
	flag.IntVar(&o.coldHomes, "cold-homes", 100, "cold homes the spread cold run wakes (0: no spread run)")
	flag.IntVar(&o.coldRounds, "cold-rounds", 5, "rounds of the one-home cold run")
	flag.DurationVar(&o.boot, "boot", 200*time.Millisecond, "boot delay of the cold demo homes")
	flag.StringVar(&o.caps, "caps", "16,128", "wake caps (wake.max_concurrent) of the spread cold run")
	flag.StringVar(&o.nginx, "nginx", defaultNginx(), `nginx binary of the cold path's floor ("" for none; coldfloor.go)`)
	flag.StringVar(&o.homeConns, "home-conns", "", "values of proxy.max_conns_per_home the one-home cold rounds compare (default: the binary's default)")
	flag.StringVar(&o.beforeBin, "before-bin", "", "another wakegate binary (the code before a change) the one-home cold rounds compare, and whose start time and heap on the same store are measured in turns with -bin's")
	flag.StringVar(&o.only, "only", "", `run one part only: "scale", "cold", "storm", or "start" (the start times of the large gateway alone)`)
	flag.IntVar(&o.regWorkers, "reg-workers", 8, "concurrent admin API registrations")
	flag.BoolVar(&o.activate, "socket-activation", false, "start the exec homes with socket activation (exec.socket_activation, the demo home on --listen-fd 3)")
	flag.StringVar(&o.client, "client", "raw", `load generator of the cold stampedes: "raw" (each caller dials its connection at the start, writes its request as bytes and reads the answer; no Transport), "open" (the same, with every connection made before the start: the time counts from the request) or "transport" (an http.Client with its own Transport per caller)`)
	flag.IntVar(&o.storm, "storm", 1000, "distinct cold homes the storm wakes at once, one request each (storm.go)")
	flag.IntVar(&o.stormSingles, "storm-singles", 5, "single cold wakes, one at a time, the storm's p99 is compared with (their median)")
	flag.StringVar(&o.stormCaps, "storm-caps", "", "wake caps (wake.max_concurrent) of the one-gateway storms (default: 16, the default cap, and -storm); the fleet storm uses the last")
	flag.IntVar(&o.stormFleet, "storm-fleet", 3, "gateways of the fleet storm, on one redis-server the bench starts (0: no fleet storm)")
	flag.BoolVar(&o.seed, "seed", false, "store the registered homes directly (copies of one registered through the API) instead of registering each through the API")
	flag.Parse()
	if o.bin == "" {
		log.Fatal("scalebench: -bin is required")
	}
	if o.client != "raw" && o.client != "open" && o.client != "transport" {
		log.Fatalf("scalebench: -client is %q; want raw, open or transport", o.client)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		log.Fatalf("scalebench: %v", err)
	}
}

func run(ctx context.Context, o options) error {
	if o.dir == "" {
		base := os.TempDir()
		if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
			base = "/dev/shm"
		}
		d, err := os.MkdirTemp(base, "scalebench-")
		if err != nil {
			return fmt.Errorf("work dir: %w", err)
		}
		defer func() { _ = os.RemoveAll(d) }()
		o.dir = d
	}
	abs, err := filepath.Abs(o.bin)
	if err != nil {
		return fmt.Errorf("bin: %w", err)
	}
	o.bin = abs
	// The bench's gateways register their homes' uids, and keep the
	// folders of homes of their own users, in a machine folder of the
	// bench's (exec.users.machine_dir), removed at the end: each run finds
	// a machine with no other gateway's uids, as a fresh one would, and
	// leaves nothing in the machine's own. The work dir is opened to other
	// users (o+x) so that the homes reach their folders in it.
	if fi, err := os.Stat(o.dir); err == nil {
		_ = os.Chmod(o.dir, fi.Mode().Perm()|0o011)
	}
	o.machine = filepath.Join(o.dir, "machine")
	defer func() { _ = os.RemoveAll(o.machine) }()
	logf("work dir %s", o.dir)
	var t table
	if o.only == "" || o.only == "scale" {
		if err := runScale(ctx, o, &t); err != nil {
			return err
		}
	}
	if o.only == "start" {
		if err := runStart(ctx, o, &t); err != nil {
			return err
		}
	}
	if o.only == "" || o.only == "cold" {
		if err := runCold(ctx, o, &t); err != nil {
			return err
		}
	}
	if o.only == "" || o.only == "storm" {
		if err := runStorm(ctx, o, &t); err != nil {
			return err
		}
	}
	t.print(os.Stdout)
	return nil
}

// logf prints progress to stderr.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// table is the result, one row per measurement.
type table struct{ rows [][2]string }

func (t *table) add(what, format string, args ...any) {
	t.rows = append(t.rows, [2]string{what, fmt.Sprintf(format, args...)})
	logf("%s: %s", what, t.rows[len(t.rows)-1][1])
}

func (t *table) print(w io.Writer) {
	fmt.Fprintln(w, "| measurement | value |")
	fmt.Fprintln(w, "| --- | --- |")
	for _, r := range t.rows {
		fmt.Fprintf(w, "| %s | %s |\n", r[0], r[1])
	}
}

// backends starts n real HTTP servers on loopback that answer every
// request with 1 KiB, and returns their base URLs.
func backends(ctx context.Context, n int) ([]string, error) {
	body := []byte(strings.Repeat("x", 1024))
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write(body)
	})
	var urls []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("backend: %w", err)
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		go func() {
			<-ctx.Done()
			_ = srv.Close()
		}()
		urls = append(urls, "http://"+ln.Addr().String())
	}
	return urls, nil
}

// percentile returns the p-th percentile (0-100) of xs, sorted in place.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sort.Float64s(xs)
	i := int(float64(len(xs)-1) * p / 100)
	return xs[i]
}

// median returns the median of xs.
func median(xs []float64) float64 {
	return percentile(append([]float64(nil), xs...), 50)
}
