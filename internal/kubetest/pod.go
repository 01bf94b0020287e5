package kubetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// tick is how often a pod's runner looks at its containers: a readiness
// probe runs at most this often, and every tick until the container's
// first pass.
const tick = 100 * time.Millisecond

// podRunner plays the kubelet for one pod: it starts the containers,
// probes them, restarts them, reports the pod's status and, on deletion,
// stops them and deletes the pod. Everything about the pod happens on the
// goroutine of run; process exits and probe results come to it as events.
type podRunner struct {
	n             *Node
	uid, ns, name string
	dir           string

	updates chan *pod   // the latest version of the pod (capacity 1)
	events  chan func() // run on the runner's goroutine
	removed chan struct{}
	done    chan struct{}

	pod        *pod
	ip         string
	freeIP     func()
	started    time.Time
	ctrs       []*ctrRun
	deleting   bool
	deadline   time.Time // SIGKILL after this while deleting
	finalized  bool      // the pod was deleted with grace period 0
	conds      map[string]podCondition
	lastReport []byte
}

// ctrRun is one container of the pod.
type ctrRun struct {
	spec  container
	image string

	proc    *Process
	cmd     *exec.Cmd
	gen     int // bumped on every start; stale probe results carry an older one
	running bool
	startAt time.Time
	state   containerState
	last    containerState
	restart int
	ready   bool
	passed  bool // passed a probe since this start
	ok, bad int  // consecutive probe passes and failures
	probing bool
	probeAt time.Time
	startBy time.Time // when the next start attempt may run
	backoff time.Duration
}

func newPodRunner(n *Node, p *pod) *podRunner {
	r := &podRunner{
		n: n, uid: p.Metadata.UID, ns: p.Metadata.Namespace, name: p.Metadata.Name,
		dir:     filepath.Join(n.dir, p.Metadata.Namespace, p.Metadata.Name),
		updates: make(chan *pod, 1),
		events:  make(chan func(), 16),
		removed: make(chan struct{}),
		done:    make(chan struct{}),
		conds:   map[string]podCondition{},
	}
	for _, c := range p.Spec.Containers {
		r.ctrs = append(r.ctrs, &ctrRun{spec: c, image: c.Image,
			state: containerState{Waiting: &waitingState{Reason: "ContainerCreating"}}})
	}
	return r
}

// update hands the runner the latest version of its pod.
func (r *podRunner) update(p *pod) {
	for {
		select {
		case r.updates <- p:
			return
		case <-r.done:
			return
		default:
		}
		select {
		case <-r.updates: // drop the older version
		default:
		}
	}
}

// remove ends the runner at once: the pod is gone from the API (or the
// agent is stopping), so its processes are killed.
func (r *podRunner) remove() {
	select {
	case <-r.removed:
	default:
		close(r.removed)
	}
	<-r.done
}

func (r *podRunner) logf(format string, args ...any) {
	r.n.log.Printf("%s/%s: "+format, append([]any{r.ns, r.name}, args...)...)
}

func (r *podRunner) run() {
	defer close(r.done)
	defer func() {
		if r.freeIP != nil {
			r.freeIP()
		}
	}()
	if err := os.MkdirAll(r.dir, 0o700); err != nil {
		r.logf("%v", err)
		return
	}
	ip, free, err := r.n.net.alloc()
	if err != nil {
		r.logf("%v", err)
		return
	}
	r.ip, r.freeIP = ip, free
	r.started = time.Now()
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case p := <-r.updates:
			r.pod = p
		case f := <-r.events:
			f()
		case <-t.C:
		case <-r.removed:
			r.kill(syscall.SIGKILL)
			r.waitExits()
			return
		}
		if r.pod == nil {
			continue
		}
		if r.pod.Metadata.DeletionTimestamp != nil && !r.deleting {
			r.terminate()
		}
		if r.deleting {
			if r.anyRunning() {
				if time.Now().After(r.deadline) {
					r.kill(syscall.SIGKILL)
				}
				continue
			}
			// Then wait for the DELETED event (or the agent's stop) to end
			// the runner, deleting again at each tick until it is done.
			if !r.finalized {
				r.finalized = r.n.finalize(r.pod)
			}
			continue
		}
		r.step(time.Now())
		if !r.report() {
			return
		}
	}
}

// terminate starts a graceful stop: SIGTERM now, SIGKILL once the grace
// period is over.
func (r *podRunner) terminate() {
	r.deleting = true
	grace := int64(30)
	if g := r.pod.Metadata.DeletionGracePeriodSeconds; g != nil {
		grace = *g
	}
	r.deadline = time.Now().Add(time.Duration(grace) * time.Second)
	r.kill(syscall.SIGTERM)
}

func (r *podRunner) kill(sig syscall.Signal) {
	for _, c := range r.ctrs {
		if c.running {
			_ = syscall.Kill(-c.cmd.Process.Pid, sig)
		}
	}
}

func (r *podRunner) anyRunning() bool {
	for _, c := range r.ctrs {
		if c.running {
			return true
		}
	}
	return false
}

// waitExits runs exit events until no container runs.
func (r *podRunner) waitExits() {
	for r.anyRunning() {
		(<-r.events)()
	}
}

// step starts what is due to start and probes what is due for a probe.
func (r *podRunner) step(now time.Time) {
	for _, c := range r.ctrs {
		if !c.running && c.state.Waiting != nil && !now.Before(c.startBy) {
			r.start(c, now)
		}
		if !c.running {
			continue
		}
		pr := c.spec.ReadinessProbe
		if pr == nil {
			c.ready = true
			continue
		}
		if !c.probing && !now.Before(c.probeAt) {
			c.probing = true
			gen, spec, ip := c.gen, c.spec, r.ip
			go func() {
				err := runProbe(pr, spec, ip)
				select {
				case r.events <- func() { r.probed(c, gen, err) }:
				case <-r.done:
				}
			}()
		}
	}
}

// probed records a readiness probe's result: ready after successThreshold
// passes in a row, not ready after failureThreshold failures in a row.
// Until the first pass the next probe runs at the next tick, then at the
// probe's period.
func (r *podRunner) probed(c *ctrRun, gen int, err error) {
	if gen != c.gen {
		return
	}
	c.probing = false
	pr := c.spec.ReadinessProbe
	if err == nil {
		c.ok, c.bad = c.ok+1, 0
		if c.ok >= max(pr.SuccessThreshold, 1) {
			c.ready, c.passed = true, true
		}
	} else {
		c.ok, c.bad = 0, c.bad+1
		if c.bad >= max(pr.FailureThreshold, 3) || !c.passed {
			c.ready = false
		}
	}
	next := tick
	if c.passed {
		next = max(time.Duration(pr.PeriodSeconds)*time.Second, tick)
		if pr.PeriodSeconds == 0 {
			next = 10 * time.Second
		}
	}
	c.probeAt = time.Now().Add(next)
}

// runProbe runs one readiness probe against the pod's address.
func runProbe(pr *probe, spec container, ip string) error {
	timeout := time.Duration(max(pr.TimeoutSeconds, 1)) * time.Second
	switch {
	case pr.HTTPGet != nil:
		g := pr.HTTPGet
		port, ok := g.Port.resolve(spec.Ports)
		if !ok {
			return fmt.Errorf("no port %v", g.Port)
		}
		host := ip
		if g.Host != "" {
			host = g.Host
		}
		scheme := "http"
		if strings.EqualFold(g.Scheme, "HTTPS") {
			scheme = "https"
		}
		path := g.Path
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+net.JoinHostPort(host, strconv.Itoa(port))+path, nil)
		if err != nil {
			return err
		}
		req.Header.Set("User-Agent", "kube-probe/1.37")
		for _, h := range g.HTTPHeaders {
			req.Header.Set(h.Name, h.Value)
		}
		resp, err := probeClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	case pr.TCPSocket != nil:
		port, ok := pr.TCPSocket.Port.resolve(spec.Ports)
		if !ok {
			return fmt.Errorf("no port %v", pr.TCPSocket.Port)
		}
		host := ip
		if pr.TCPSocket.Host != "" {
			host = pr.TCPSocket.Host
		}
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(host, strconv.Itoa(port)), timeout)
		if err != nil {
			return err
		}
		return conn.Close()
	}
	return errors.New("the agent runs only httpGet and tcpSocket probes")
}

// probeClient is the kubelet's: no keep-alive, no redirects followed
// beyond the default, no proxy.
var probeClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}

// start starts a container's process, or records why it cannot.
func (r *podRunner) start(c *ctrRun, now time.Time) {
	cmdline, ok := r.n.image(c.image)
	if !ok {
		reason := "ErrImagePull"
		if c.state.Waiting != nil && (c.state.Waiting.Reason == "ErrImagePull" || c.state.Waiting.Reason == "ImagePullBackOff") {
			reason = "ImagePullBackOff"
		}
		msg := fmt.Sprintf("Failed to pull image %q: the kubetest node has no image %q (register it with Node.Image)", c.image, c.image)
		if reason == "ImagePullBackOff" {
			msg = fmt.Sprintf("Back-off pulling image %q", c.image)
		}
		c.state = containerState{Waiting: &waitingState{Reason: reason, Message: msg}}
		c.backoff = min(max(2*c.backoff, time.Second), 10*time.Second)
		c.startBy = now.Add(c.backoff)
		return
	}
	env := r.env(c)
	var argv []string
	if len(c.spec.Command) > 0 {
		argv = append(append(argv, c.spec.Command...), c.spec.Args...)
	} else {
		argv = append(append(argv, cmdline...), c.spec.Args...)
	}
	for i := range argv {
		argv[i] = expand(argv[i], env)
	}
	if len(argv) == 0 {
		c.state = containerState{Waiting: &waitingState{Reason: "CreateContainerError", Message: "no command: the image has none and the container gives none"}}
		c.startBy = now.Add(time.Second)
		return
	}
	out, err := os.OpenFile(filepath.Join(r.dir, c.spec.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		r.logf("%v", err)
		return
	}
	defer out.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = r.dir
	if c.spec.WorkingDir != "" {
		cmd.Dir = c.spec.WorkingDir
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = make([]string, 0, len(env))
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if err := spawn(cmd); err != nil {
		c.state = containerState{Waiting: &waitingState{Reason: "RunContainerError", Message: err.Error()}}
		c.backoff = min(max(2*c.backoff, time.Second), 10*time.Second)
		c.startBy = now.Add(c.backoff)
		return
	}
	if c.gen > 0 {
		c.restart++
	}
	c.gen++
	c.cmd, c.running, c.startAt = cmd, true, now
	c.ready, c.passed, c.ok, c.bad, c.probing = false, false, 0, 0, false
	c.state = containerState{Running: &runningState{StartedAt: apiTime(now)}}
	if pr := c.spec.ReadinessProbe; pr != nil {
		c.probeAt = now.Add(time.Duration(pr.InitialDelaySeconds) * time.Second)
	}
	c.proc = &Process{Namespace: r.ns, Pod: r.name, UID: r.uid, Container: c.spec.Name, Image: c.image, PID: cmd.Process.Pid, Started: now}
	r.n.mu.Lock()
	r.n.procs = append(r.n.procs, c.proc)
	r.n.mu.Unlock()
	gen := c.gen
	go func() {
		_ = cmd.Wait()
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		f := func() { r.exited(c, gen, ws) }
		select {
		case r.events <- f:
		case <-r.done:
		}
	}()
}

// exited records a container's exit and schedules its restart as the
// pod's restartPolicy says (Always, the default; OnFailure; Never).
func (r *podRunner) exited(c *ctrRun, gen int, ws syscall.WaitStatus) {
	if gen != c.gen {
		return
	}
	now := time.Now()
	code, reason := ws.ExitStatus(), "Completed"
	t := &terminatedState{ExitCode: code, StartedAt: apiTime(c.startAt), FinishedAt: apiTime(now),
		ContainerID: fmt.Sprintf("kubetest://%d", c.cmd.Process.Pid)}
	if ws.Signaled() {
		t.Signal = int(ws.Signal())
		t.ExitCode = 128 + int(ws.Signal())
		code = -1
	}
	if t.ExitCode != 0 {
		reason = "Error"
	}
	t.Reason = reason
	c.running, c.ready, c.probing = false, false, false
	r.n.mu.Lock()
	c.proc.Exited, c.proc.ExitCode = true, code
	r.n.mu.Unlock()
	policy := "Always"
	if r.pod != nil && r.pod.Spec.RestartPolicy != "" {
		policy = r.pod.Spec.RestartPolicy
	}
	if r.deleting || policy == "Never" || (policy == "OnFailure" && t.ExitCode == 0) {
		c.state = containerState{Terminated: t}
		return
	}
	// A container that ran a while starts over from the shortest back-off.
	if now.Sub(c.startAt) > 10*time.Second {
		c.backoff = 0
	}
	c.backoff = min(max(2*c.backoff, tick), 5*time.Second)
	c.last = containerState{Terminated: t}
	c.startBy = now.Add(c.backoff)
	c.state = containerState{Waiting: &waitingState{Reason: "CrashLoopBackOff",
		Message: fmt.Sprintf("back-off %v restarting failed container=%s pod=%s_%s(%s)", c.backoff, c.spec.Name, r.name, r.ns, r.uid)}}
}

// env is the container's environment: its env entries (values with
// $(VAR) expanded from the entries before them; fieldRef for the pod's
// name, namespace, uid, node name, host and pod IP), then POD_IP, POD_NAME,
// POD_NAMESPACE and IMAGE, and PATH and HOME if the pod sets none.
func (r *podRunner) env(c *ctrRun) map[string]string {
	env := map[string]string{}
	for _, e := range c.spec.Env {
		v := expand(e.Value, env)
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			v = r.field(e.ValueFrom.FieldRef.FieldPath)
		}
		env[e.Name] = v
	}
	env["POD_IP"] = r.ip
	env["POD_NAME"] = r.name
	env["POD_NAMESPACE"] = r.ns
	env["IMAGE"] = c.image
	if _, ok := env["PATH"]; !ok {
		env["PATH"] = os.Getenv("PATH")
	}
	if _, ok := env["HOME"]; !ok {
		env["HOME"] = r.dir
	}
	return env
}

func (r *podRunner) field(path string) string {
	switch path {
	case "metadata.name":
		return r.name
	case "metadata.namespace":
		return r.ns
	case "metadata.uid":
		return r.uid
	case "spec.nodeName":
		return NodeName
	case "status.podIP":
		return r.ip
	case "status.hostIP":
		return HostIP
	}
	return ""
}

// report writes the pod's status when it changed since the last write. It
// returns false when the pod is gone from the API.
func (r *podRunner) report() bool {
	st := r.status()
	b, err := json.Marshal(map[string]any{"status": st})
	if err != nil || bytes.Equal(b, r.lastReport) {
		return true
	}
	path := "/api/v1/namespaces/" + r.ns + "/pods/" + r.name + "/status"
	if err := r.n.c.Do(r.n.ctx, http.MethodPatch, path, b, nil); err != nil {
		if IsStatus(err, http.StatusNotFound) {
			r.kill(syscall.SIGKILL)
			r.waitExits()
			return false
		}
		if r.n.ctx.Err() == nil {
			r.logf("status: %v", err)
		}
		return true
	}
	r.lastReport = b
	return true
}

func (r *podRunner) status() podStatus {
	st := podStatus{
		HostIP: HostIP, HostIPs: []ipEntry{{HostIP}},
		PodIP: r.ip, PodIPs: []ipEntry{{r.ip}},
		StartTime: apiTime(r.started),
	}
	allReady, anyStarted, allDone, allZero := true, false, true, true
	for _, c := range r.ctrs {
		cs := containerStatus{Name: c.spec.Name, Image: c.image, Ready: c.ready && c.running,
			Started: c.running, RestartCount: c.restart, State: c.state, LastState: c.last}
		if c.gen > 0 {
			anyStarted = true
			cs.ContainerID = fmt.Sprintf("kubetest://%d", c.cmd.Process.Pid)
		}
		if !cs.Ready {
			allReady = false
		}
		if c.state.Terminated == nil {
			allDone = false
		} else if c.state.Terminated.ExitCode != 0 {
			allZero = false
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	switch {
	case allDone && allZero:
		st.Phase = "Succeeded"
	case allDone:
		st.Phase = "Failed"
	case anyStarted:
		st.Phase = "Running"
	default:
		st.Phase = "Pending"
	}
	ready := "False"
	if allReady {
		ready = "True"
	}
	if r.pod != nil {
		for _, pc := range r.pod.Status.Conditions {
			if pc.Type == "PodScheduled" {
				st.Conditions = append(st.Conditions, pc)
			}
		}
	}
	st.Conditions = append(st.Conditions,
		r.cond("Initialized", "True"), r.cond("ContainersReady", ready), r.cond("Ready", ready))
	return st
}

// cond returns a condition, its lastTransitionTime kept until its status
// changes.
func (r *podRunner) cond(typ, status string) podCondition {
	c, ok := r.conds[typ]
	if !ok || c.Status != status {
		c = podCondition{Type: typ, Status: status, LastTransitionTime: apiTime(time.Now())}
		if status == "False" && (typ == "Ready" || typ == "ContainersReady") {
			c.Reason = "ContainersNotReady"
		}
		r.conds[typ] = c
	}
	return c
}
