package kubernetes_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/wakegate/wakegate/internal/kubetest"
	"github.com/wakegate/wakegate/internal/testbin"
)

func TestMain(m *testing.M) {
	code := testbin.Main(m)
	kubetest.Stop()
	os.Exit(code)
}

const adminToken = "kube-test-admin-token-0123456789"

// The images the node agent runs: the gateway's own demo home, serving
// on the pod's address at port 8080 the version its tag names.
// demoBad serves another version than its tag says (a roll onto it fails
// the version assert).
const (
	demoV1  = "wakegate-demo:v1"
	demoV2  = "wakegate-demo:v2"
	demoBad = "wakegate-demo:v3"
)

// rig is a test's cluster, namespace and the gateway's user there.
type rig struct {
	c     *kubetest.Cluster
	ns    string
	bin   string
	user  string // the user the gateway runs as, bound to deploy/kubernetes's Role
	admin string // base URL of the gateway's admin listener
	dir   string // the gateway's folder, kept over restarts
	gw    *testbin.Proc
}

// newRig starts (or joins) the cluster, registers the demo images, makes
// a namespace and binds user "wakegate" there to the Role of
// deploy/kubernetes/rbac.yaml, the only rights its gateways have.
func newRig(t *testing.T) *rig {
	t.Helper()
	c := kubetest.Start(t)
	bin := testbin.Build(t)
	for img, v := range map[string]string{demoV1: "v1", demoV2: "v2", demoBad: "v3-other"} {
		c.Node().Image(img, []string{bin, "demo-home", "--addr", "$(POD_IP):8080", "--version", v})
	}
	r := &rig{c: c, ns: c.Namespace(t), bin: bin, user: "wakegate",
		admin: fmt.Sprintf("http://127.0.0.1:%d", testbin.FreePort(t)), dir: t.TempDir()}
	r.bindRole(t, r.user, "wakegate", deployRules(t))
	return r
}

// deployRules are the rules of the Role in deploy/kubernetes/rbac.yaml.
func deployRules(t *testing.T) []map[string]any {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "deploy", "kubernetes", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	d := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var doc struct {
			Kind  string           `yaml:"kind"`
			Rules []map[string]any `yaml:"rules"`
		}
		if err := d.Decode(&doc); err != nil {
			t.Fatalf("deploy/kubernetes/rbac.yaml has no Role: %v", err)
		}
		if doc.Kind == "Role" {
			return doc.Rules
		}
	}
}

// bindRole makes Role name with rules in the namespace and binds user to it.
func (r *rig) bindRole(t *testing.T, user, name string, rules []map[string]any) {
	t.Helper()
	r.do(t, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/"+r.ns+"/roles", map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
		"metadata": map[string]any{"name": name}, "rules": rules}, nil)
	r.do(t, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/"+r.ns+"/rolebindings", map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
		"metadata": map[string]any{"name": name},
		"subjects": []map[string]any{{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}},
		"roleRef":  map[string]any{"kind": "Role", "name": name, "apiGroup": "rbac.authorization.k8s.io"}}, nil)
}

// do is an admin call to the API server.
func (r *rig) do(t *testing.T, method, path string, body, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.c.Do(ctx, method, path, body, out); err != nil {
		t.Fatal(err)
	}
}

// deployment makes Deployment name of image with 0 replicas, serving
// target, with annotations.
func (r *rig) deployment(t *testing.T, name, image string, annotations map[string]string) {
	t.Helper()
	r.do(t, "POST", "/apis/apps/v1/namespaces/"+r.ns+"/deployments", map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": name, "annotations": annotations},
		"spec": map[string]any{
			"replicas": 0,
			"selector": map[string]any{"matchLabels": map[string]string{"app": name}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]string{"app": name}},
				"spec": map[string]any{"containers": []map[string]any{{
					"name": "web", "image": image, "args": []string{"--target", name},
					"ports": []map[string]any{{"containerPort": 8080}},
				}}},
			},
		},
	}, nil)
}

// workload is what a test reads of a Deployment.
type workload struct {
	Metadata struct {
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Replicas int `json:"replicas"`
	} `json:"spec"`
}

func (r *rig) workload(t *testing.T, name string) workload {
	t.Helper()
	var w workload
	r.do(t, "GET", "/apis/apps/v1/namespaces/"+r.ns+"/deployments/"+name, nil, &w)
	return w
}

// pods returns the names of the namespace's pods.
func (r *rig) pods(t *testing.T) []string {
	t.Helper()
	var l struct {
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		} `json:"items"`
	}
	r.do(t, "GET", "/api/v1/namespaces/"+r.ns+"/pods", nil, &l)
	var out []string
	for _, p := range l.Items {
		out = append(out, p.Metadata.Name)
	}
	return out
}

// starts counts the agent's process starts in the rig's namespace.
func (r *rig) starts() int {
	n := 0
	for _, p := range r.c.Node().Processes() {
		if p.Namespace == r.ns {
			n++
		}
	}
	return n
}

// config is a gateway config with the admin API and providers.kubernetes
// on the cluster as user (extra lines added to the section), top-level
// lines top and homes (YAML list items).
func (r *rig) config(t *testing.T, user, extra, top, homes string) string {
	kc := r.c.Kubeconfig(t, r.c.Token(user))
	return fmt.Sprintf(`listen: "%%ADDR%%"
data_dir: "%%DATA%%"
log:
  access: false
wake:
  ready_timeout: 30s
admin:
  listen: %q
  tokens: [%q]
%sproviders:
  kubernetes:
    kubeconfig: %q
    namespace: %s
%shomes:
%s`, strings.TrimPrefix(r.admin, "http://"), adminToken, top, kc, r.ns, extra, homes)
}

// serve starts a gateway on cfg in the rig's folder (a restart keeps its
// data).
func (r *rig) serve(t *testing.T, cfg string) *testbin.Proc {
	t.Helper()
	r.gw = testbin.ServeIn(t, r.dir, cfg)
	return r.gw
}

// get sends GET path through gw and returns status and body.
func get(t *testing.T, gw *testbin.Proc, path string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 60 * time.Second}
	res, err := c.Get("http://" + gw.Addr + path)
	if err != nil {
		t.Fatalf("GET %s: %v\n%s", path, err, gw.Output())
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// adm calls the admin API and decodes its JSON answer into out (if not nil).
func (r *rig) adm(t *testing.T, method, path string, body, out any) (int, string) {
	t.Helper()
	return testbin.Admin(t, r.admin, adminToken, method, path, body, out)
}

// home reads home id through the admin API.
func (r *rig) home(t *testing.T, id string) testbin.HomeView {
	t.Helper()
	return testbin.AdminHome(t, r.admin, adminToken, id)
}

// pageVersion is the version the demo home's page names.
func pageVersion(body string) string {
	_, rest, ok := strings.Cut(body, "version: <code>")
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, "</code>")
	return v
}

// median of ds.
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
