package kubetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
)

// Versions of the control plane scripts/kube/build.sh builds.
const (
	KubernetesVersion = "v1.37.2"
	EtcdVersion       = "v3.7.0"
)

// Users are the users of the token file made at start, besides the admin:
// each has a token (Cluster.Token) and no rights until a test binds a Role
// or ClusterRole to it.
var Users = []string{"wakegate", "wakegate-2", "nobody"}

// ServiceClusterIPRange is the API server's --service-cluster-ip-range: an
// address range it only allocates Service addresses from, never a target.
const ServiceClusterIPRange = "10.96.0.0/24"

// BinDir returns the folder that holds the control plane's binary, kube
// (etcd, kube-apiserver, kube-controller-manager and kube-scheduler in one
// program, its first argument naming the component): $WAKEGATE_KUBE_BIN,
// or where scripts/kube/build.sh puts it by default.
func BinDir() string {
	if d := os.Getenv("WAKEGATE_KUBE_BIN"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = os.TempDir()
	}
	return filepath.Join(home, ".cache", "wakegate", "kube-1.37.2-etcd-3.7.0")
}

// binary is the control plane's program in BinDir.
const binary = "kube"

// Cluster is the control plane of a test binary and its one node.
type Cluster struct {
	Server     string // https://127.0.0.1:PORT
	CAFile     string // PEM of the API server's serving CA
	AdminToken string // a token of "admin", a member of system:masters
	Dir        string // the cluster's temp folder; each component logs to Dir/NAME/NAME.log

	admin     *client
	tokens    map[string]string // user -> token
	procs     []*proc           // in start order
	node      *Node
	closeOnce sync.Once
	began     time.Time
	phases    []string // "what at 1.2s" for each wait of the start
}

var shared struct {
	mu  sync.Mutex
	c   *Cluster
	err error
}

// Start starts (once per test binary; later calls share it) etcd,
// kube-apiserver, kube-controller-manager and kube-scheduler on loopback
// ports, each in its own folder under one temp folder, and the node agent
// (Node). It returns once /readyz answers, the default service account
// exists and the node is Ready and schedulable. The processes are killed
// when the test binary ends (Pdeathsig); TestMain should still call Stop
// (or use Main) so that nothing outlives the tests and the temp folder is
// removed.
//
// It skips the test when the binary is missing from BinDir, unless
// CI=true: then it fails, naming scripts/kube/build.sh.
func Start(t testing.TB) *Cluster {
	t.Helper()
	dir := BinDir()
	if _, err := os.Stat(filepath.Join(dir, binary)); err != nil {
		msg := fmt.Sprintf("kubetest: %s is not in %s: build the control plane with scripts/kube/build.sh (set WAKEGATE_KUBE_BIN to use another folder)", binary, dir)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.c == nil && shared.err == nil {
		shared.c, shared.err = start(dir, testbin.FreePort(t), testbin.FreePort(t), testbin.FreePort(t), testbin.FreePort(t), testbin.FreePort(t))
		if shared.err == nil {
			c := shared.c
			t.Logf("kubetest: control plane and node agent ready in %v (%s; API server %s, logs in %s)",
				time.Since(c.began).Round(time.Millisecond), strings.Join(c.phases, ", "), c.Server, c.Dir)
		}
	}
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.c
}

// Stop closes the cluster Start started, if any. TestMain calls it after
// the tests.
func Stop() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.c != nil {
		shared.c.Close()
	}
}

// Main runs a package's tests, then stops the cluster. Call it from
// TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }
func Main(m *testing.M) int {
	code := m.Run()
	Stop()
	return code
}

func start(bin string, etcdPort, peerPort, apiPort, kcmPort, schedPort int) (c *Cluster, err error) {
	root, err := os.MkdirTemp("", "kubetest-")
	if err != nil {
		return nil, err
	}
	c = &Cluster{began: time.Now(), Dir: root, Server: "https://127.0.0.1:" + strconv.Itoa(apiPort), tokens: map[string]string{}}
	defer func() {
		if err != nil {
			c.Close()
			c = nil
		}
	}()
	sub := func(name string) (string, error) {
		d := filepath.Join(root, name)
		return d, os.MkdirAll(d, 0o700)
	}
	for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "pods"} {
		if _, err := sub(name); err != nil {
			return c, err
		}
	}
	apiDir := filepath.Join(root, "kube-apiserver")
	pk, err := makePKI(apiDir)
	if err != nil {
		return c, fmt.Errorf("kubetest: certificates: %w", err)
	}
	c.CAFile = pk.caFile
	c.AdminToken = newToken()
	tokenFile := filepath.Join(apiDir, "tokens.csv")
	lines := []string{c.AdminToken + `,admin,admin,"system:masters"`}
	for _, u := range Users {
		tok := newToken()
		c.tokens[u] = tok
		lines = append(lines, tok+","+u+","+u)
	}
	if err := os.WriteFile(tokenFile, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		return c, err
	}
	if c.admin, err = newClient(c.Server, c.CAFile, c.AdminToken); err != nil {
		return c, err
	}

	run := func(name string, args ...string) (*proc, error) {
		d := filepath.Join(root, name)
		p, err := startProc(name, filepath.Join(bin, binary), d, filepath.Join(d, name+".log"), append([]string{name}, args...)...)
		if err == nil {
			c.procs = append(c.procs, p)
		}
		return p, err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	if _, err := run("etcd",
		"--name=kubetest", "--data-dir="+filepath.Join(root, "etcd", "data"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=kubetest="+peerURL,
		"--unsafe-no-fsync", "--log-level=warn",
	); err != nil {
		return c, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.startStep(ctx, "etcd /health", func() error {
		resp, err := http.Get(etcdURL + "/health")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}); err != nil {
		return c, err
	}

	if _, err := run("kube-apiserver",
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port="+strconv.Itoa(apiPort),
		"--cert-dir="+apiDir,
		"--tls-cert-file="+pk.certFile, "--tls-private-key-file="+pk.keyFile,
		"--token-auth-file="+tokenFile,
		"--authorization-mode=Node,RBAC",
		"--service-account-key-file="+pk.saPub,
		"--service-account-signing-key-file="+pk.saKey,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range="+ServiceClusterIPRange,
		// The API server's own Endpoints would name 127.0.0.1, which
		// Endpoints may not hold; nothing here needs them.
		"--endpoint-reconciler-type=none",
		"--profiling=false",
	); err != nil {
		return c, err
	}
	if err := c.startStep(ctx, "kube-apiserver /readyz", func() error {
		return c.Do(ctx, http.MethodGet, "/readyz", nil, nil)
	}); err != nil {
		return c, err
	}

	kubeconfig := filepath.Join(root, "admin.kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(c.kubeconfig(c.AdminToken)), 0o600); err != nil {
		return c, err
	}
	// The controller manager and the scheduler: the admin's kubeconfig
	// for the API and for checking their own callers, their own secure
	// port, no leader election.
	component := func(name string, port int, args ...string) error {
		_, err := run(name, append([]string{
			"--kubeconfig=" + kubeconfig,
			"--authentication-kubeconfig=" + kubeconfig, "--authorization-kubeconfig=" + kubeconfig,
			"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port),
			"--cert-dir=" + filepath.Join(root, name),
			"--leader-elect=false", "--profiling=false",
		}, args...)...)
		return err
	}
	if err := component("kube-controller-manager", kcmPort,
		"--use-service-account-credentials=false",
		"--service-account-private-key-file="+pk.saKey,
		"--root-ca-file="+pk.caFile,
		"--service-cluster-ip-range="+ServiceClusterIPRange,
		// The node lifecycle controller takes the not-ready taint off
		// the node once the agent reports Ready; it checks every second.
		"--node-monitor-period=1s",
	); err != nil {
		return c, err
	}
	if err := component("kube-scheduler", schedPort); err != nil {
		return c, err
	}

	if c.node, err = startNode(c, filepath.Join(root, "pods")); err != nil {
		return c, err
	}
	if err := c.startStep(ctx, "the default service account", func() error {
		return c.Do(ctx, http.MethodGet, "/api/v1/namespaces/default/serviceaccounts/default", nil, nil)
	}); err != nil {
		return c, err
	}
	if err := c.startStep(ctx, "node "+NodeName+" Ready and schedulable", func() error {
		var n struct {
			Spec struct {
				Taints []struct{ Key, Effect string } `json:"taints"`
			} `json:"spec"`
		}
		if err := c.Do(ctx, http.MethodGet, "/api/v1/nodes/"+NodeName, nil, &n); err != nil {
			return err
		}
		if len(n.Spec.Taints) > 0 {
			return fmt.Errorf("tainted %s", n.Spec.Taints[0].Key)
		}
		return nil
	}); err != nil {
		return c, err
	}
	return c, nil
}

// startStep is waitFor for a step of the start, whose time it records
// for the log.
func (c *Cluster) startStep(ctx context.Context, what string, check func() error) error {
	if err := c.waitFor(ctx, what, check); err != nil {
		return err
	}
	c.phases = append(c.phases, fmt.Sprintf("%s at %v", what, time.Since(c.began).Round(10*time.Millisecond)))
	return nil
}

// waitFor calls check every 100 ms until it returns nil, a process of the
// cluster exits, or ctx ends.
func (c *Cluster) waitFor(ctx context.Context, what string, check func() error) error {
	for {
		err := check()
		if err == nil {
			return nil
		}
		for _, p := range c.procs {
			if p.exited() {
				return fmt.Errorf("kubetest: %s exited (%v) while waiting for %s; the end of %s:\n%s", p.name, p.err, what, p.log, p.tail())
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubetest: waiting for %s: %w (last: %v; logs in %s)", what, ctx.Err(), err, c.Dir)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Close stops the node agent (killing every pod's processes), then the
// control plane, and removes the cluster's temp folder. It is safe to call
// more than once and on a cluster whose start failed half way.
func (c *Cluster) Close() {
	c.closeOnce.Do(func() {
		if c.node != nil {
			c.node.stop()
		}
		for i := len(c.procs) - 1; i >= 0; i-- {
			c.procs[i].stop(10 * time.Second)
		}
		_ = os.RemoveAll(c.Dir)
	})
}

// Token returns the bearer token of one of Users. Such a user has no
// rights until the test binds a Role to it. The token file is made at
// start and the API server reads it only then, so the users and their
// groups are fixed: each is in no group but system:authenticated. It
// panics for any other user or when groups are given.
func (c *Cluster) Token(user string, groups ...string) string {
	tok, ok := c.tokens[user]
	if !ok || len(groups) > 0 {
		panic(fmt.Sprintf("kubetest: no token for user %q in groups %v: the token file holds %v, in no group", user, groups, Users))
	}
	return tok
}

// Kubeconfig writes a kubeconfig for the cluster and token (context
// "kubetest", the CA embedded by path) into a temp folder of t and returns
// its path.
func (c *Cluster) Kubeconfig(t testing.TB, token string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(c.kubeconfig(token)), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func (c *Cluster) kubeconfig(token string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: kubetest
  cluster:
    server: %q
    certificate-authority: %q
users:
- name: kubetest
  user:
    token: %q
contexts:
- name: kubetest
  context:
    cluster: kubetest
    user: kubetest
current-context: kubetest
`, c.Server, c.CAFile, token)
}

// Namespace creates a namespace with a fresh name and returns the name.
// At cleanup it deletes the namespace and waits (up to a minute) until no
// pod of it is left, so no process of one test outlives it.
func (c *Cluster) Namespace(t testing.TB) string {
	t.Helper()
	name := "kt-" + newToken()[:10]
	ctx := context.Background()
	body := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}}
	if err := c.Do(ctx, http.MethodPost, "/api/v1/namespaces", body, nil); err != nil {
		t.Fatalf("kubetest: create namespace: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Do(ctx, http.MethodDelete, "/api/v1/namespaces/"+name, nil, nil); err != nil && !IsStatus(err, http.StatusNotFound) {
			t.Errorf("kubetest: delete namespace %s: %v", name, err)
			return
		}
		// The namespace controller deletes the pods too, but only after
		// a pass over every resource type; deleting them at once lets
		// the agent stop them now. No new pod can be made in a
		// namespace being deleted.
		if err := c.Do(ctx, http.MethodDelete, "/api/v1/namespaces/"+name+"/pods", nil, nil); err != nil && !IsStatus(err, http.StatusNotFound) {
			t.Logf("kubetest: delete the pods of %s: %v", name, err)
		}
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		err := c.waitFor(wctx, "the pods of namespace "+name+" to go", func() error {
			if n := c.node.podsIn(name); n > 0 {
				return fmt.Errorf("%d pods left on the node", n)
			}
			var l struct{ Items []any }
			if err := c.Do(wctx, http.MethodGet, "/api/v1/namespaces/"+name+"/pods", nil, &l); err != nil {
				return err
			}
			if len(l.Items) > 0 {
				return fmt.Errorf("%d pods left", len(l.Items))
			}
			return nil
		})
		if err != nil {
			t.Logf("kubetest: %v", err)
		}
	})
	return name
}

// Do makes a REST call as the admin: body is encoded as JSON ([]byte and
// string are sent as they are; a PATCH is a JSON merge patch) and a 2xx
// answer is decoded into out when out is not nil. Any other answer is a
// *StatusError.
func (c *Cluster) Do(ctx context.Context, method, path string, body any, out any) error {
	return c.admin.do(ctx, method, path, body, out)
}

// Node returns the node agent Start started.
func (c *Cluster) Node() *Node { return c.node }

func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
