package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/wakegate/wakegate/internal/homesdir"
)

// gw is one wakegate process under measurement.
type gw struct {
	name  string
	bin   string
	cfg   string // config file
	addr  string // public listener, host:port
	admin string // admin listener, host:port
	token string
	data  string // data_dir
	// machine is its exec.users.machine_dir, the bench's (options.machine).
	machine string
	cmd     *exec.Cmd
	logf    *os.File
	client  *http.Client
}

// freeAddr returns a loopback address with a free port.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// start runs the gateway and waits until /readyz answers 200; it returns
// how long that took from the exec.
func (g *gw) start(ctx context.Context, dir string) (time.Duration, error) {
	f, err := os.OpenFile(filepath.Join(dir, g.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, fmt.Errorf("gateway log: %w", err)
	}
	g.logf = f
	g.cmd = exec.Command(g.bin, "serve", "--config", g.cfg)
	g.cmd.SysProcAttr = diesWithBench()
	g.cmd.Stdout, g.cmd.Stderr = f, f
	g.cmd.Env = append(os.Environ(), "WAKEGATE_TOKEN="+g.token)
	t0 := time.Now()
	if err := g.cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %s: %w", g.name, err)
	}
	quick := &http.Client{Timeout: time.Second}
	for {
		res, err := quick.Get("http://" + g.addr + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return time.Since(t0), nil
			}
		}
		if g.cmd.ProcessState != nil {
			return 0, fmt.Errorf("%s exited; see %s", g.name, f.Name())
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// stop ends the gateway with SIGTERM and waits for it.
func (g *gw) stop() {
	if g.cmd == nil || g.cmd.Process == nil {
		return
	}
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = g.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		_ = g.cmd.Process.Kill()
		<-done
	}
	g.cmd = nil
	// A root gateway keeps the home folders of a data_dir closed to other
	// users under its machine folder: they go with the bench's data_dir,
	// or a later gateway at the same path would find them.
	_ = os.RemoveAll(homesdir.Of(g.machine, g.data))
	if g.logf != nil {
		_ = g.logf.Close()
	}
}

// diesWithBench makes a process the bench starts get SIGTERM when the
// bench ends, however it ends (a closed pipe, a signal), so that no
// gateway, home or nginx outlives it. (It is sent when the thread that
// started the process exits; the bench's threads last as long as it.)
func diesWithBench() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}

// cpu returns the CPU time the gateway has run so far, to the
// nanosecond where the scheduler's statistics are there (taskCPU).
func (g *gw) cpu() (time.Duration, error) {
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", g.cmd.Process.Pid)); err != nil {
		return 0, fmt.Errorf("gateway CPU: %w", err)
	}
	return taskCPU(g.cmd.Process.Pid), nil
}

// procCPU reads utime+stime of pid from /proc/pid/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read stat: %w", err)
	}
	// The command name may hold spaces: fields start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("read stat: no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	// utime and stime are fields 14 and 15 of the whole line (1-based);
	// after the name, state is f[0], so they are f[11] and f[12].
	if len(f) < 13 {
		return 0, errors.New("read stat: short line")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("read stat: bad times")
	}
	const hz = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / hz, nil
}

// taskCPU is the CPU time pid's threads have run, to the nanosecond
// (/proc/pid/task/*/schedstat), or its utime+stime when the scheduler's
// statistics are not there. A thread that has ended is not counted; the
// processes measured here keep theirs.
func taskCPU(pid int) time.Duration {
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var total time.Duration
	read := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if fs := strings.Fields(string(b)); len(fs) > 0 {
			if ns, err := strconv.ParseInt(fs[0], 10, 64); err == nil {
				total += time.Duration(ns)
				read++
			}
		}
	}
	if read == 0 {
		d, _ := procCPU(pid)
		return d
	}
	return total
}

// cpuByPID is the CPU time of some processes.
type cpuByPID map[int]time.Duration

// childrenCPU is the CPU time of each child of pid (the homes a gateway
// started).
func childrenCPU(pid int) cpuByPID {
	out := cpuByPID{}
	for _, c := range children(pid) {
		out[c] = taskCPU(c)
	}
	return out
}

// children are the processes pid started that still run (or are not yet
// reaped).
func children(pid int) []int {
	var out []int
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, s := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(s); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// since is the CPU the processes of c ran after before was read; a
// process started since counts whole.
func (c cpuByPID) since(before cpuByPID) time.Duration {
	var d time.Duration
	for pid, t := range c {
		d += t - before[pid]
	}
	return d
}

// selfCPU is the user+system CPU time of this process so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// perCaller is d over n callers, in µs.
func perCaller(d time.Duration, n int) float64 {
	return float64(d.Microseconds()) / float64(n)
}

// rss returns the gateway's resident set size in bytes.
func (g *gw) rss() (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", g.cmd.Process.Pid))
	if err != nil {
		return 0, fmt.Errorf("read status: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("read status: %w", err)
			}
			return kb * 1024, nil
		}
	}
	return 0, errors.New("read status: no VmRSS")
}

// metrics scrapes the gateway's /metrics and returns each sample by its
// name with its labels (`name{label="v"}`) and, summed over the labels,
// by its bare name.
func (g *gw) metrics(ctx context.Context) (map[string]float64, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+g.admin+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+g.token)
	res, err := g.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	defer res.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, val, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			continue
		}
		if i := strings.IndexByte(name, '{'); i >= 0 {
			// Labelled samples are kept as they are and summed under
			// their name.
			out[name] = v
			name = name[:i]
		}
		out[name] += v
	}
	return out, sc.Err()
}

// heapLive returns the smallest heap in use seen over n scrapes spaced by
// gap: the live heap after a collection, without forcing one.
func (g *gw) heapLive(ctx context.Context, n int, gap time.Duration) (float64, error) {
	best := -1.0
	for i := range n {
		if i > 0 {
			time.Sleep(gap)
		}
		m, err := g.metrics(ctx)
		if err != nil {
			return 0, err
		}
		v := m["go_memstats_heap_alloc_bytes"]
		if best < 0 || v < best {
			best = v
		}
	}
	return best, nil
}

// adminDo sends an admin request with the token and returns status and body.
func (g *gw) adminDo(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+g.admin+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+g.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := g.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
}
