package kubetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"
)

// NodeName is the name of the one node the agent registers.
const NodeName = "wakegate-test-node"

// HostIP is the node's address in pod status (hostIP) and in the Node's
// InternalIP.
const HostIP = "127.0.0.1"

// Process is one start of a container's process by the agent.
type Process struct {
	Namespace, Pod, UID string
	Container, Image    string
	PID                 int
	Started             time.Time
	Exited              bool
	ExitCode            int // -1 when a signal ended it
}

// Node is the node agent: it plays the kubelet of the one node of the
// cluster (see the package doc for what it leaves out).
type Node struct {
	c      *Cluster
	dir    string
	log    *log.Logger
	net    *podNet
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	images  map[string][]string
	runners map[string]*podRunner // by pod UID
	procs   []*Process
}

// Image registers an image the agent can run: a pod's container with that
// image (matched exactly, tag included) runs cmd as a local process, with
// the container's args after it, or the container's command and args in
// place of cmd when it gives a command. A container whose image was never
// registered waits with reason ErrImagePull, then ImagePullBackOff, and
// starts once the image is registered.
func (n *Node) Image(name string, cmd []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.images[name] = slices.Clone(cmd)
}

func (n *Node) image(name string) ([]string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	cmd, ok := n.images[name]
	return cmd, ok
}

// Processes returns every container process the agent started, in start
// order, exited ones included: a test counts starts per pod or image.
func (n *Node) Processes() []Process {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]Process, len(n.procs))
	for i, p := range n.procs {
		out[i] = *p
	}
	return out
}

// Log returns what a pod's container printed (stdout and stderr, every
// start of it), or "" if it never ran.
func (n *Node) Log(namespace, pod, container string) string {
	b, _ := os.ReadFile(filepath.Join(n.dir, namespace, pod, container+".log"))
	return string(b)
}

func (n *Node) podsIn(namespace string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := 0
	for _, r := range n.runners {
		if r.ns == namespace {
			k++
		}
	}
	return k
}

func startNode(c *Cluster, dir string) (*Node, error) {
	lf, err := os.OpenFile(filepath.Join(dir, "agent.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	pn, err := newPodNet()
	if err != nil {
		lf.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &Node{
		c: c, dir: dir, net: pn, ctx: ctx, cancel: cancel,
		log:     log.New(lf, "", log.Ltime|log.Lmicroseconds),
		images:  map[string][]string{},
		runners: map[string]*podRunner{},
	}
	if err := n.register(ctx); err != nil {
		n.stop()
		return nil, err
	}
	n.wg.Add(2)
	go n.heartbeat()
	go n.watchPods()
	return n, nil
}

// stop kills every pod's processes and ends the agent's loops.
func (n *Node) stop() {
	n.cancel()
	n.wg.Wait()
	n.net.close()
}

func (n *Node) register(ctx context.Context) error {
	now := apiTime(time.Now())
	cond := func(typ, status, reason, msg string) map[string]any {
		return map[string]any{"type": typ, "status": status, "reason": reason, "message": msg,
			"lastHeartbeatTime": now, "lastTransitionTime": now}
	}
	res := map[string]string{"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"}
	body := map[string]any{
		"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]any{"name": NodeName, "labels": map[string]string{
			"kubernetes.io/hostname": NodeName, "kubernetes.io/os": "linux", "kubernetes.io/arch": runtime.GOARCH,
		}},
		"status": map[string]any{
			"capacity": res, "allocatable": res,
			"addresses": []map[string]string{{"type": "InternalIP", "address": HostIP}, {"type": "Hostname", "address": NodeName}},
			"conditions": []map[string]any{
				cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubetest agent"),
				cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubetest agent"),
				cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubetest agent"),
				cond("Ready", "True", "KubeletReady", "kubetest agent is posting ready status"),
			},
			"nodeInfo": map[string]string{
				"kubeletVersion": KubernetesVersion, "operatingSystem": "linux", "architecture": runtime.GOARCH,
				"containerRuntimeVersion": "kubetest://" + KubernetesVersion,
			},
		},
	}
	if err := n.c.Do(ctx, http.MethodPost, "/api/v1/nodes", body, nil); err != nil {
		return fmt.Errorf("kubetest: register node: %w", err)
	}
	return nil
}

// heartbeat renews the node's Lease every 5 s (the lease lasts 40 s), as
// a kubelet does; the node lifecycle controller reads it.
func (n *Node) heartbeat() {
	defer n.wg.Done()
	path := "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	created := false
	for {
		now := apiMicroTime(time.Now())
		var err error
		if !created {
			err = n.c.Do(n.ctx, http.MethodPost, path, map[string]any{
				"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
				"metadata": map[string]any{"name": NodeName},
				"spec":     map[string]any{"holderIdentity": NodeName, "leaseDurationSeconds": 40, "renewTime": now},
			}, nil)
			created = err == nil || IsStatus(err, http.StatusConflict)
		} else {
			err = n.c.Do(n.ctx, http.MethodPatch, path+"/"+NodeName, map[string]any{"spec": map[string]any{"renewTime": now}}, nil)
		}
		if err != nil && n.ctx.Err() == nil {
			n.log.Printf("lease: %v", err)
		}
		wait := tick.C
		if !created {
			wait = time.After(200 * time.Millisecond) // the lease namespace may not exist yet
		}
		select {
		case <-n.ctx.Done():
			return
		case <-wait:
		}
	}
}

var errGone = errors.New("resource version too old")

// watchPods lists the pods bound to the node, then watches from the list's
// resourceVersion, keeping the last version seen (bookmarks included); a
// 410 Gone starts over with a fresh list.
func (n *Node) watchPods() {
	defer n.wg.Done()
	defer n.killAll()
	sel := url.QueryEscape("spec.nodeName=" + NodeName)
	rv := ""
	for n.ctx.Err() == nil {
		if rv == "" {
			var l struct {
				Metadata struct {
					ResourceVersion string `json:"resourceVersion"`
				} `json:"metadata"`
				Items []*pod `json:"items"`
			}
			if err := n.c.Do(n.ctx, http.MethodGet, "/api/v1/pods?fieldSelector="+sel, nil, &l); err != nil {
				n.pause("list pods", err)
				continue
			}
			n.sync(l.Items)
			rv = l.Metadata.ResourceVersion
		}
		var err error
		rv, err = n.watch(sel, rv)
		if errors.Is(err, errGone) {
			n.log.Printf("watch: %v: listing again", err)
			rv = ""
		} else if err != nil {
			n.pause("watch pods", err)
		}
	}
}

func (n *Node) pause(what string, err error) {
	if n.ctx.Err() != nil {
		return
	}
	n.log.Printf("%s: %v", what, err)
	select {
	case <-n.ctx.Done():
	case <-time.After(200 * time.Millisecond):
	}
}

// watch follows one watch request and returns the last resourceVersion
// seen.
func (n *Node) watch(sel, rv string) (string, error) {
	path := "/api/v1/pods?watch=1&allowWatchBookmarks=true&timeoutSeconds=300&fieldSelector=" + sel + "&resourceVersion=" + url.QueryEscape(rv)
	req, err := n.c.admin.request(n.ctx, http.MethodGet, path, nil)
	if err != nil {
		return rv, err
	}
	resp, err := n.c.admin.http.Do(req)
	if err != nil {
		return rv, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusGone {
		return rv, errGone
	}
	if resp.StatusCode != http.StatusOK {
		return rv, fmt.Errorf("watch: status %d", resp.StatusCode)
	}
	dec := json.NewDecoder(resp.Body)
	for {
		var ev struct {
			Type   string          `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		if err := dec.Decode(&ev); err != nil {
			if n.ctx.Err() != nil {
				return rv, nil
			}
			return rv, nil // the server ended the watch (timeoutSeconds); go on from rv
		}
		if ev.Type == "ERROR" {
			var st struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			}
			_ = json.Unmarshal(ev.Object, &st)
			if st.Code == http.StatusGone {
				return rv, fmt.Errorf("%w: %s", errGone, st.Message)
			}
			return rv, fmt.Errorf("watch error %d: %s", st.Code, st.Message)
		}
		p := &pod{}
		if err := json.Unmarshal(ev.Object, p); err != nil {
			return rv, fmt.Errorf("decode %s event: %w", ev.Type, err)
		}
		rv = p.Metadata.ResourceVersion
		switch ev.Type {
		case "ADDED", "MODIFIED":
			n.dispatch(p)
		case "DELETED":
			n.gone(p.Metadata.UID)
		}
	}
}

// sync applies a full list: every pod listed is dispatched, every runner
// whose pod is not listed any more is ended.
func (n *Node) sync(items []*pod) {
	live := map[string]bool{}
	for _, p := range items {
		live[p.Metadata.UID] = true
		n.dispatch(p)
	}
	n.mu.Lock()
	var gone []string
	for uid := range n.runners {
		if !live[uid] {
			gone = append(gone, uid)
		}
	}
	n.mu.Unlock()
	for _, uid := range gone {
		n.gone(uid)
	}
}

// dispatch hands the latest version of a pod to its runner, starting one
// for a pod the agent has not seen.
func (n *Node) dispatch(p *pod) {
	n.mu.Lock()
	r, ok := n.runners[p.Metadata.UID]
	if !ok {
		if p.Status.Phase == "Succeeded" || p.Status.Phase == "Failed" {
			n.mu.Unlock()
			if p.Metadata.DeletionTimestamp != nil {
				n.finalize(p)
			}
			return
		}
		r = newPodRunner(n, p)
		n.runners[p.Metadata.UID] = r
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			r.run()
			n.mu.Lock()
			delete(n.runners, r.uid)
			n.mu.Unlock()
		}()
	}
	n.mu.Unlock()
	r.update(p)
}

// gone ends the runner of a pod that is no longer in the API.
func (n *Node) gone(uid string) {
	n.mu.Lock()
	r := n.runners[uid]
	n.mu.Unlock()
	if r != nil {
		r.remove()
	}
}

// finalize deletes a pod for good (grace period 0, on the pod's UID), the
// last step of a kubelet once the pod's containers are gone. It reports
// whether the pod is deleted (or gone, or replaced by another of the same
// name).
func (n *Node) finalize(p *pod) bool {
	body := map[string]any{"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
		"preconditions": map[string]string{"uid": p.Metadata.UID}}
	path := "/api/v1/namespaces/" + p.Metadata.Namespace + "/pods/" + p.Metadata.Name
	err := n.c.Do(n.ctx, http.MethodDelete, path, body, nil)
	if err == nil || IsStatus(err, http.StatusNotFound) || IsStatus(err, http.StatusConflict) {
		return true
	}
	if n.ctx.Err() == nil {
		n.log.Printf("%s/%s: delete: %v", p.Metadata.Namespace, p.Metadata.Name, err)
	}
	return false
}

// killAll ends every runner at once (the agent is stopping).
func (n *Node) killAll() {
	n.mu.Lock()
	rs := make([]*podRunner, 0, len(n.runners))
	for _, r := range n.runners {
		rs = append(rs, r)
	}
	n.mu.Unlock()
	for _, r := range rs {
		r.remove()
	}
}

func apiTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func apiMicroTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000Z07:00") }
