package kubernetes_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/kubetest"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/registry/registrytest"
)

// TestColdRequestScalesDeployment: a cold request through the gateway
// scales a Deployment from 0 to 1 and is answered by its pod; the idle
// suspend scales it to 0 and its pod is gone; then 100 concurrent callers
// of the cold home cause one scale-up and one container start, all
// answered by the one pod. Every call the gateway makes runs under the
// Role of deploy/kubernetes.
func TestColdRequestScalesDeployment(t *testing.T) {
	r := newRig(t)
	r.deployment(t, "web", demoV1, nil)
	gw := r.serve(t, r.config(t, r.user, "", "", "  - {id: web, provider: kubernetes, idle_timeout: 1s, options: {name: web, port: 8080}}\n"))

	began := time.Now()
	code, body := get(t, gw, "/node/web/")
	one := time.Since(began)
	if code != http.StatusOK || pageVersion(body) != "v1" {
		t.Fatalf("cold request: %d %q\n%s", code, body, gw.Output())
	}
	t.Logf("cold wake, 1 caller: %v", one)
	if n := r.starts(); n != 1 {
		t.Fatalf("%d container starts after the first request, want 1", n)
	}
	w := r.workload(t, "web")
	if w.Metadata.Annotations["wakegate.io/generation"] == "" || w.Metadata.Annotations["wakegate.io/owner"] == "" {
		t.Fatalf("the scale-up left no fence annotations: %v", w.Metadata.Annotations)
	}

	testbin.Eventually(t, "the idle home scaled to 0 and its pod gone", func() bool {
		return r.workload(t, "web").Spec.Replicas == 0 && len(r.pods(t)) == 0
	})
	testbin.Eventually(t, "the home recorded suspended", func() bool {
		return r.home(t, "web").Status == "suspended"
	})

	const callers = 100
	var wg sync.WaitGroup
	times := make([]time.Duration, callers)
	codes := make([]int, callers)
	bodies := make([]string, callers)
	start := make(chan struct{})
	for i := range callers {
		wg.Go(func() {
			<-start
			c := &http.Client{Timeout: 60 * time.Second}
			t0 := time.Now()
			res, err := c.Get("http://" + gw.Addr + "/node/web/")
			times[i] = time.Since(t0)
			if err != nil {
				bodies[i] = err.Error()
				return
			}
			_ = res.Body.Close()
			codes[i] = res.StatusCode
		})
	}
	close(start)
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusOK {
			t.Fatalf("caller %d of %d: %d %s\n%s", i, callers, c, bodies[i], gw.Output())
		}
	}
	if n := r.starts(); n != 2 {
		t.Fatalf("%d container starts after %d concurrent callers, want 2 (one per wake)", n, callers)
	}
	if n := strings.Count(gw.Output(), "kubernetes: scaled"); n != 3 {
		t.Fatalf("%d scale writes logged, want 3: two wakes and one suspend", n)
	}
	t.Logf("cold wake, %d callers: median %v, slowest %v", callers, median(times), slices.Max(times))
}

// TestPodHomeCreatedAndDeleted: a Pod home's pod is created from its
// template at the first request, with the version's image, and deleted
// at the idle suspend.
func TestPodHomeCreatedAndDeleted(t *testing.T) {
	r := newRig(t)
	home := `  - id: sandbox
    provider: kubernetes
    version: v2
    idle_timeout: 1s
    options:
      kind: Pod
      image: "wakegate-demo:{version}"
      pod:
        containers:
          - {name: web, image: "{image}", args: ["--target", "sandbox"]}
`
	gw := r.serve(t, r.config(t, r.user, "", "", home))
	code, body := get(t, gw, "/node/sandbox/")
	if code != http.StatusOK || pageVersion(body) != "v2" {
		t.Fatalf("cold request: %d %q\n%s", code, body, gw.Output())
	}
	// The pod may be gone already (its idle second passed): the agent
	// remembers what it ran.
	ps := r.c.Node().Processes()
	if len(ps) == 0 || !slices.ContainsFunc(ps, func(p kubetest.Process) bool {
		return p.Namespace == r.ns && p.Pod == "wakegate-sandbox" && p.Image == demoV2
	}) {
		t.Fatalf("processes after the wake: %+v, want pod wakegate-sandbox of %s", ps, demoV2)
	}
	testbin.Eventually(t, "the idle home's pod deleted", func() bool { return len(r.pods(t)) == 0 })
	testbin.Eventually(t, "the home recorded suspended", func() bool {
		return r.home(t, "sandbox").Status == "suspended"
	})
}

// TestRollWrongVersionRolledBack: a roll onto v2 patches the Deployment's
// image and the home serves v2; a roll onto an image whose home answers
// another version fails the version assert and is rolled back onto v2.
func TestRollWrongVersionRolledBack(t *testing.T) {
	r := newRig(t)
	r.deployment(t, "web", demoV1, nil)
	home := "  - {id: web, provider: kubernetes, version: v1, idle_timeout: 0s, options: {name: web, image: \"wakegate-demo:{version}\"}}\n"
	cfg := func(v string) string {
		return r.config(t, r.user, "", fmt.Sprintf("roll:\n  mode: lazy\n  target: {version: %q}\n", v), home)
	}
	gw := r.serve(t, cfg("v2"))
	if code, body := r.adm(t, "POST", "/admin/homes/web/roll", nil, nil); code != http.StatusOK {
		t.Fatalf("roll to v2: %d %s\n%s", code, body, gw.Output())
	}
	if code, body := get(t, gw, "/node/web/"); code != http.StatusOK || pageVersion(body) != "v2" {
		t.Fatalf("after the roll to v2: %d %q\n%s", code, pageVersion(body), gw.Output())
	}
	if v := r.home(t, "web").Version; v != "v2" {
		t.Fatalf("home version %q after the roll", v)
	}
	gw.Stop()

	gw = r.serve(t, cfg("v3"))
	if code, body := r.adm(t, "POST", "/admin/homes/web/roll", nil, nil); code == http.StatusOK {
		t.Fatalf("roll to v3, whose home says v3-other: %d %s, want a failure", code, body)
	}
	if code, body := get(t, gw, "/node/web/"); code != http.StatusOK || pageVersion(body) != "v2" {
		t.Fatalf("after the rollback: %d %q\n%s", code, pageVersion(body), gw.Output())
	}
	if v := r.home(t, "web").Version; v != "v2" {
		t.Fatalf("home version %q after the rollback, want v2", v)
	}
	testbin.Eventually(t, "rolled_back in the gateway's log", func() bool { return strings.Contains(gw.Output(), "rolled_back") })
	if img := r.image(t, "web"); img != demoV2 {
		t.Fatalf("the Deployment's image after the rollback: %s, want %s", img, demoV2)
	}
}

// image is the first container's image of Deployment name.
func (r *rig) image(t *testing.T, name string) string {
	t.Helper()
	var w struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Image string `json:"image"`
					} `json:"containers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	r.do(t, "GET", "/apis/apps/v1/namespaces/"+r.ns+"/deployments/"+name, nil, &w)
	return w.Spec.Template.Spec.Containers[0].Image
}

// TestTwoGatewaysOnRedis: two gateways on one Redis, each as its own
// user, called at once for one cold Deployment home: one scale-up, one
// container start; every replicas write the API server took carried the
// generation after the one it read, so the Deployment's generation counts
// exactly the writes.
func TestTwoGatewaysOnRedis(t *testing.T) {
	r := newRig(t)
	r.bindRole(t, "wakegate-2", "wakegate-2", deployRules(t))
	srv := registrytest.StartRedis(t)
	r.deployment(t, "web", demoV1, nil)
	home := "  - {id: web, provider: kubernetes, idle_timeout: 0s, options: {name: web}}\n"
	top := fmt.Sprintf("redis:\n  url: %q\n", srv.URL())
	var gws []*testbin.Proc
	for i, user := range []string{"wakegate", "wakegate-2"} {
		rr := *r
		rr.admin = fmt.Sprintf("http://127.0.0.1:%d", testbin.FreePort(t))
		gws = append(gws, testbin.Serve(t, rr.config(t, user, fmt.Sprintf("    owner: gw%d\n", i+1), top, home)))
	}
	var wg sync.WaitGroup
	codes := make([]int, 40)
	for i := range codes {
		gw := gws[i%2]
		wg.Go(func() {
			res, err := (&http.Client{Timeout: 60 * time.Second}).Get("http://" + gw.Addr + "/node/web/")
			if err == nil {
				codes[i] = res.StatusCode
				_ = res.Body.Close()
			}
		})
	}
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusOK {
			t.Fatalf("caller %d: %d\n%s\n%s", i, c, gws[0].Output(), gws[1].Output())
		}
	}
	if n := r.starts(); n != 1 {
		t.Fatalf("%d container starts, want 1", n)
	}
	writes := strings.Count(gws[0].Output(), "kubernetes: scaled") + strings.Count(gws[1].Output(), "kubernetes: scaled")
	ann := r.workload(t, "web").Metadata.Annotations
	if writes != 1 || ann["wakegate.io/generation"] != "1" {
		t.Fatalf("%d scale writes logged, generation %q (owner %q): want one write, generation 1",
			writes, ann["wakegate.io/generation"], ann["wakegate.io/owner"])
	}
}

// TestMissingVerbGivesHint: a gateway whose account may not update
// deployments/scale fails the wake, and the home's reason names the
// resource and the verb to grant; the public answer names neither.
func TestMissingVerbGivesHint(t *testing.T) {
	r := newRig(t)
	var rules []map[string]any
	for _, rule := range deployRules(t) {
		if res, _ := rule["resources"].([]any); !slices.Contains(res, any("deployments/scale")) {
			rules = append(rules, rule)
		}
	}
	r.bindRole(t, "wakegate-2", "partial", rules)
	r.deployment(t, "web", demoV1, nil)
	gw := r.serve(t, r.config(t, "wakegate-2", "", "", "  - {id: web, provider: kubernetes, options: {name: web}}\n"))
	code, body := get(t, gw, "/node/web/")
	if code < 500 || strings.Contains(body, "deployments") || strings.Contains(body, r.ns) {
		t.Fatalf("public answer: %d %q", code, body)
	}
	want := `hint="forbidden: the gateway's account cannot update deployments/scale in namespace ` + r.ns +
		`: grant \"update\" on deployments/scale`
	testbin.Eventually(t, "the hint in the log", func() bool { return strings.Contains(gw.Output(), want) })
}

// TestDiscoveryOfAnnotatedDeployment: with discover: true, an annotated
// Deployment made before the gateway starts is a home, one made after is
// found from the watch, a removed one's home is removed with a log line,
// and a bad annotation is logged naming the deployment and the key.
func TestDiscoveryOfAnnotatedDeployment(t *testing.T) {
	r := newRig(t)
	r.deployment(t, "pre", demoV1, map[string]string{"wakegate.enable": "true", "wakegate.target": "early"})
	r.deployment(t, "bad", demoV1, map[string]string{"wakegate.enable": "true", "wakegate.port": "http"})
	gw := r.serve(t, r.config(t, r.user, "    discover: true\n", "", "  []\n"))
	testbin.Eventually(t, "the bad annotation logged", func() bool {
		return strings.Contains(gw.Output(), "deployment bad: label wakegate.port: not a port number")
	})
	testbin.Eventually(t, "the annotated deployment's home", func() bool {
		code, _ := r.adm(t, "GET", "/admin/homes/pre", nil, nil)
		return code == http.StatusOK
	})
	if code, body := get(t, gw, "/node/early/"); code != http.StatusOK || pageVersion(body) != "v1" {
		t.Fatalf("the annotated deployment's home: %d %q\n%s", code, body, gw.Output())
	}
	r.deployment(t, "post", demoV1, map[string]string{"wakegate.enable": "true"})
	testbin.Eventually(t, "the later deployment's home", func() bool {
		code, _ := r.adm(t, "GET", "/admin/homes/post", nil, nil)
		return code == http.StatusOK
	})
	r.do(t, "DELETE", "/apis/apps/v1/namespaces/"+r.ns+"/deployments/post", nil, nil)
	testbin.Eventually(t, "the removed deployment's home removed", func() bool {
		code, _ := r.adm(t, "GET", "/admin/homes/post", nil, nil)
		return code == http.StatusNotFound
	})
	testbin.Eventually(t, "the removal logged", func() bool {
		return strings.Contains(gw.Output(), "home removed, its deployment is gone")
	})
}

// TestImagePullFailureNamesImage: a Deployment whose image the node
// cannot pull fails the wake as soon as its pod says so, the log's hint
// names the image, and the public answer names neither image nor
// namespace.
func TestImagePullFailureNamesImage(t *testing.T) {
	r := newRig(t)
	r.deployment(t, "web", "wakegate-demo:missing", nil)
	gw := r.serve(t, r.config(t, r.user, "", "", "  - {id: web, provider: kubernetes, options: {name: web}}\n"))
	code, body := get(t, gw, "/node/web/")
	if code < 500 || strings.Contains(body, "wakegate-demo") || strings.Contains(body, r.ns) {
		t.Fatalf("public answer: %d %q", code, body)
	}
	testbin.Eventually(t, "the image named in the log's hint", func() bool {
		return strings.Contains(gw.Output(), "the cluster cannot pull image wakegate-demo:missing for container web")
	})
	if strings.Contains(gw.Output(), "no pod of Deployment") {
		t.Fatalf("the wake waited out its timeout instead of failing on the pull\n%s", gw.Output())
	}
}
