package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// floor is the one-home stampede without wakegate, to tell what part of
// the time is wakegate's: the same callers, each on a new connection, sent
// to the awake demo home itself, and through nginx in front of it (when
// -nginx names a binary). It runs in every round, after the cold and warm
// stampedes through the gateway and before the home is suspended, on the
// same machine and the same load generator.
type floor struct {
	o             options
	direct, nginx stats
	ran           bool
}

// floorPath is what every stampede asks the demo home for.
const floorPath = "/node/c00000/whoami"

// measure runs the floor stampedes on home c00000 of g, awake now, in the
// order round r gives (the first of the two alternates).
func (f *floor) measure(ctx context.Context, g *gw, r int) error {
	ep, err := homeEndpoint(ctx, g, "c00000")
	if err != nil {
		return err
	}
	steps := []func() error{
		func() error { return f.measureDirect(ep) },
		func() error { return f.measureNginx(ctx, ep) },
	}
	if r%2 == 1 {
		steps[0], steps[1] = steps[1], steps[0]
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return err
		}
	}
	f.ran = true
	return nil
}

func (f *floor) measureDirect(ep string) error {
	res := burst(f.o.client, f.o.coldCallers, func(int) string { return ep + floorPath })
	if res.failed > 0 {
		return fmt.Errorf("stampede on the home itself: %d of %d failed, first: %s", res.failed, f.o.coldCallers, res.first)
	}
	f.direct.add(res)
	logf("floor: the home itself p50 %.0f ms p99 %.0f ms", res.p50, res.p99)
	return nil
}

func (f *floor) measureNginx(ctx context.Context, ep string) error {
	if f.o.nginx == "" {
		return nil
	}
	n, err := startNginx(ctx, f.o, ep)
	if err != nil {
		return err
	}
	defer n.stop()
	cpu0 := n.cpu()
	res := burst(f.o.client, f.o.coldCallers, func(int) string { return "http://" + n.addr + floorPath })
	res.cpuPer = float64((n.cpu() - cpu0).Microseconds()) / float64(f.o.coldCallers)
	if res.failed > 0 {
		return fmt.Errorf("stampede through nginx: %d of %d failed, first: %s (see %s)", res.failed, f.o.coldCallers, res.first, n.dir)
	}
	f.nginx.add(res)
	logf("floor: through nginx p50 %.0f ms p99 %.0f ms, nginx CPU %.0f µs/caller", res.p50, res.p99, res.cpuPer)
	return nil
}

// rows adds the floor's rows to t.
func (f *floor) rows(t *table) {
	if !f.ran {
		return
	}
	t.add(fmt.Sprintf("floor: the same %d callers on the awake home itself, no proxy", f.o.coldCallers), "%s", f.direct.latString(false))
	if f.o.nginx != "" {
		t.add(fmt.Sprintf("floor: the same %d callers through nginx to the awake home", f.o.coldCallers), "%s", f.nginx.latString(true))
	}
}

// latString is the medians without the wakes; cpu says whether the CPU
// per caller (the proxy's) was measured.
func (s *stats) latString(cpu bool) string {
	out := fmt.Sprintf("p50 %.0f ms, p99 %.0f ms, max %.0f ms", median(s.p50), median(s.p99), median(s.max))
	if cpu {
		out += fmt.Sprintf(", proxy CPU %.0f µs/caller", median(s.cpu))
	}
	return out + fmt.Sprintf(" (medians of %d rounds)", len(s.p99))
}

// homeEndpoint asks the admin API where home id listens.
func homeEndpoint(ctx context.Context, g *gw, id string) (string, error) {
	code, b, err := g.adminDo(ctx, http.MethodGet, "/admin/homes/"+id, nil)
	if err != nil || code != http.StatusOK {
		return "", fmt.Errorf("home %s: %d %v %s", id, code, err, b)
	}
	var h struct {
		Endpoint string `json:"endpoint"`
	}
	if err := json.Unmarshal(b, &h); err != nil || h.Endpoint == "" {
		return "", fmt.Errorf("home %s: no endpoint in %s (%v)", id, b, err)
	}
	return strings.TrimSuffix(h.Endpoint, "/"), nil
}

// nginxProc is an nginx in front of one upstream, configured as the
// shared proxy benchmark configures it (upstream keep-alive, no access
// log, a backlog of 4096), with as many workers as the machine has CPUs.
type nginxProc struct {
	dir  string
	addr string
	cmd  *exec.Cmd
}

// nginxConf is the configuration: listen address, upstream address.
const nginxConf = `pid nginx.pid;
error_log error.log warn;
worker_rlimit_nofile 65536;
%s
events {
    worker_connections 18000;
    use epoll;
}
http {
    access_log off;
    server_tokens off;
    tcp_nodelay on;
    keepalive_timeout 65s;
    client_body_temp_path tmp/client_body;
    proxy_temp_path       tmp/proxy;
    fastcgi_temp_path     tmp/fastcgi;
    uwsgi_temp_path       tmp/uwsgi;
    scgi_temp_path        tmp/scgi;
    upstream home {
        server %s;
        keepalive          128;
        keepalive_requests 10000;
        keepalive_timeout  60s;
    }
    server {
        listen %s backlog=4096;
        location / {
            proxy_pass http://home;
            proxy_http_version 1.1;
            proxy_set_header Host $http_host;
            proxy_set_header Connection "";
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
        }
    }
}
`

// startNginx starts nginx in front of upstream (a base URL) and waits
// until it answers.
func startNginx(ctx context.Context, o options, upstream string) (*nginxProc, error) {
	dir, err := os.MkdirTemp(o.dir, "nginx-")
	if err != nil {
		return nil, fmt.Errorf("nginx dir: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o700); err != nil {
		return nil, fmt.Errorf("nginx dir: %w", err)
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;" // the workers read the prefix, which only root may
	}
	conf := filepath.Join(dir, "nginx.conf")
	up := strings.TrimPrefix(upstream, "http://")
	if err := os.WriteFile(conf, fmt.Appendf(nil, nginxConf, user, up, addr), 0o600); err != nil {
		return nil, fmt.Errorf("nginx conf: %w", err)
	}
	n := &nginxProc{dir: dir, addr: addr}
	n.cmd = exec.Command(o.nginx, "-p", dir+"/", "-e", filepath.Join(dir, "error.log"), "-c", conf, "-g", "daemon off; worker_processes 2;")
	logFile, err := os.Create(filepath.Join(dir, "out.log"))
	if err != nil {
		return nil, fmt.Errorf("nginx log: %w", err)
	}
	defer logFile.Close()
	n.cmd.Stdout, n.cmd.Stderr = logFile, logFile
	if err := n.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start nginx: %w", err)
	}
	if err := n.ready(ctx); err != nil {
		n.stop()
		return nil, err
	}
	return n, nil
}

// ready waits until nginx answers the stampede's path with 200.
func (n *nginxProc) ready(ctx context.Context) error {
	quick := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for range 500 {
		res, err := quick.Get("http://" + n.addr + floorPath)
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return errors.New("nginx did not answer within 5s; see " + n.dir)
}

// cpu is the user+system CPU of nginx's master and workers so far.
func (n *nginxProc) cpu() time.Duration {
	pid := n.cmd.Process.Pid
	total, _ := procCPU(pid)
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return total
	}
	for _, f := range strings.Fields(string(b)) {
		if c, err := strconv.Atoi(f); err == nil {
			if d, err := procCPU(c); err == nil {
				total += d
			}
		}
	}
	return total
}

// stop ends nginx (SIGTERM: fast shutdown) and waits for it.
func (n *nginxProc) stop() {
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = n.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = n.cmd.Process.Kill()
		<-done
	}
}

// defaultNginx is the nginx on PATH, "" when there is none.
func defaultNginx() string {
	p, err := exec.LookPath("nginx")
	if err != nil {
		return ""
	}
	return p
}
