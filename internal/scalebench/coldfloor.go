package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// floor is the one-home stampede without wakegate, to tell what part of
// the time is wakegate's: the same callers, each on a new connection, sent
// to the awake demo home itself, through nginx in front of it (when
// -nginx names a binary), and to a cold demo home with no proxy at all
// (measureCold). It runs in every round, after the cold and warm
// stampedes through the gateway and before the home is suspended, on the
// same machine and the same load generator.
type floor struct {
	o                              options
	direct, nginx, cold, nginxCold stats
	ran                            bool
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
	pid := g.cmd.Process.Pid
	steps := []func() error{
		func() error { return f.measureDirect(ep, pid) },
		func() error { return f.measureNginx(ctx, ep, pid) },
		func() error { return f.measureCold(ctx, "no proxy") },
	}
	if f.o.nginx != "" {
		steps = append(steps, func() error { return f.measureCold(ctx, "nginx") })
	}
	for i := range steps {
		if err := steps[(i+r)%len(steps)](); err != nil {
			return err
		}
	}
	f.ran = true
	return nil
}

// measureDirect sends the stampede to the awake home of the gateway
// gwPID at ep.
func (f *floor) measureDirect(ep string, gwPID int) error {
	home0 := childrenCPU(gwPID)
	res := burst(f.o.client, f.o.coldCallers, func(int) string { return ep + floorPath }, nil)
	res.homeCPU = perCaller(childrenCPU(gwPID).since(home0), f.o.coldCallers)
	if res.failed > 0 {
		return fmt.Errorf("stampede on the home itself: %d of %d failed, first: %s", res.failed, f.o.coldCallers, res.failure)
	}
	f.direct.add(res)
	logf("floor: the home itself p50 %.0f ms p99 %.0f ms", res.p50, res.p99)
	return nil
}

// measureNginx sends the stampede through nginx to the awake home of the
// gateway gwPID at ep.
func (f *floor) measureNginx(ctx context.Context, ep string, gwPID int) error {
	if f.o.nginx == "" {
		return nil
	}
	n, err := startNginx(ctx, f.o, ep, true)
	if err != nil {
		return err
	}
	defer n.stop()
	cpu0, home0 := n.cpu(), childrenCPU(gwPID)
	res := burst(f.o.client, f.o.coldCallers, func(int) string { return "http://" + n.addr + floorPath }, nil)
	res.cpuPer = float64((n.cpu() - cpu0).Microseconds()) / float64(f.o.coldCallers)
	res.homeCPU = perCaller(childrenCPU(gwPID).since(home0), f.o.coldCallers)
	if res.failed > 0 {
		return fmt.Errorf("stampede through nginx: %d of %d failed, first: %s (see %s)", res.failed, f.o.coldCallers, res.failure, n.dir)
	}
	f.nginx.add(res)
	logf("floor: through nginx p50 %.0f ms p99 %.0f ms, nginx CPU %.0f µs/caller", res.p50, res.p99, res.cpuPer)
	return nil
}

// measureCold is the cold stampede on a home with a wake that costs
// nothing: a demo home booting for -boot, started the moment the first
// caller's request is out, on a listening socket made before it
// (--listen-fd). The kernel
// completes the connections made to it and keeps them and their requests
// in the socket's accept queue while the home boots, as the gateway keeps
// its callers during a wake, at no cost to anyone. With via "nginx" the
// callers go through nginx, started beforehand, whose upstream is that
// socket; else straight to the home. What the callers wait for is then
// the boot and the work of the home, the load generator and nginx.
func (f *floor) measureCold(ctx context.Context, via string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("cold home's socket: %w", err)
	}
	addr := ln.Addr().String()
	file, err := ln.(*net.TCPListener).File()
	_ = ln.Close() // the file keeps the socket listening
	if err != nil {
		return fmt.Errorf("cold home's socket: %w", err)
	}
	defer file.Close()
	front, into := addr, &f.cold
	var n *nginxProc
	if via == "nginx" {
		if n, err = startNginx(ctx, f.o, "http://"+addr, false); err != nil {
			return err
		}
		defer n.stop()
		front, into = n.addr, &f.nginxCold
	}
	cmd := exec.CommandContext(ctx, f.o.bin, "demo-home", "--listen-fd", "3", "--target", "c00000",
		"--boot-delay", f.o.boot.String())
	cmd.ExtraFiles = []*os.File{file} // descriptor 3 in the child
	cmd.SysProcAttr = diesWithBench()
	var cpu0 time.Duration
	if n != nil {
		cpu0 = n.cpu()
	}
	// The home starts once the first request is out, as a wake could.
	res := burst(f.o.client, f.o.coldCallers, func(int) string { return "http://" + front + floorPath }, cmd.Start)
	if cmd.Process == nil {
		return fmt.Errorf("start the cold home: %s", res.failure)
	}
	res.homeCPU = perCaller(taskCPU(cmd.Process.Pid), f.o.coldCallers)
	if n != nil {
		res.cpuPer = perCaller(n.cpu()-cpu0, f.o.coldCallers)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	if res.failed > 0 {
		return fmt.Errorf("stampede on a cold home (%s): %d of %d failed, first: %s", via, res.failed, f.o.coldCallers, res.failure)
	}
	into.add(res)
	logf("floor: cold home (%s) p50 %.0f ms p99 %.0f ms, home CPU %.0f µs/caller", via, res.p50, res.p99, res.homeCPU)
	return nil
}

// rows adds the floor's rows to t.
func (f *floor) rows(t *table) {
	if !f.ran {
		return
	}
	t.add(fmt.Sprintf("floor: the same %d callers on a cold home (boot %s), no proxy: its socket made before it starts, the callers waiting in the accept queue while it boots", f.o.coldCallers, f.o.boot), "%s", f.cold.latString(false))
	t.add(fmt.Sprintf("floor: the same %d callers on the awake home itself, no proxy", f.o.coldCallers), "%s", f.direct.latString(false))
	if f.o.nginx != "" {
		t.add(fmt.Sprintf("floor: the same %d callers through nginx to a cold home (boot %s) made as above", f.o.coldCallers, f.o.boot), "%s", f.nginxCold.latString(true))
		t.add(fmt.Sprintf("floor: the same %d callers through nginx to the awake home", f.o.coldCallers), "%s", f.nginx.latString(true))
	}
}

// latString is the medians without the wakes; cpu says whether the CPU
// per caller (the proxy's) was measured.
func (s *stats) latString(cpu bool) string {
	out := fmt.Sprintf("%s, p50 %.0f ms, p99 %.0f ms, max %.0f ms", s.firsts(), median(s.p50), median(s.p99), median(s.max))
	if cpu {
		out += fmt.Sprintf(", proxy CPU %.0f µs/caller", median(s.cpu))
	}
	out += fmt.Sprintf(", home CPU %.0f µs/caller, load generator %.0f", median(s.homeCPU), median(s.client))
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
// until it answers: with answers, until the stampede's path through it
// answers 200; else until it accepts connections (the upstream may not
// be serving yet).
func startNginx(ctx context.Context, o options, upstream string, answers bool) (*nginxProc, error) {
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
	n.cmd.SysProcAttr = diesWithBench()
	logFile, err := os.Create(filepath.Join(dir, "out.log"))
	if err != nil {
		return nil, fmt.Errorf("nginx log: %w", err)
	}
	defer logFile.Close()
	n.cmd.Stdout, n.cmd.Stderr = logFile, logFile
	if err := n.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start nginx: %w", err)
	}
	if err := n.ready(ctx, answers); err != nil {
		n.stop()
		return nil, err
	}
	return n, nil
}

// ready waits until nginx answers the stampede's path with 200, or with
// answers false until it accepts a connection.
func (n *nginxProc) ready(ctx context.Context, answers bool) error {
	quick := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for range 500 {
		if !answers {
			if c, err := net.DialTimeout("tcp", n.addr, time.Second); err == nil {
				_ = c.Close()
				return nil
			}
		} else if res, err := quick.Get("http://" + n.addr + floorPath); err == nil {
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

// cpu is the CPU time of nginx's master and workers so far.
func (n *nginxProc) cpu() time.Duration {
	pid := n.cmd.Process.Pid
	total := taskCPU(pid)
	for _, d := range childrenCPU(pid) {
		total += d
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
