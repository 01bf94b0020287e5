package kubetest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
)

// The pods of these tests run this test binary as a tiny web server:
// `kubetest.test serve-pod ADDR` answers GET / with the pod's name and
// image, /healthz with ok, and /exit?code=N by exiting with N.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "serve-pod" {
		servePod(os.Args[2])
		return
	}
	os.Exit(Main(m))
}

func servePod(addr string) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"pod": os.Getenv("POD_NAME"), "image": os.Getenv("IMAGE"), "ip": os.Getenv("POD_IP")})
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("GET /exit", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.URL.Query().Get("code"))
		w.(http.Flusher).Flush()
		go func() { time.Sleep(50 * time.Millisecond); os.Exit(code) }()
	})
	fmt.Println("serving on", addr)
	if err := http.ListenAndServe(addr, mux); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

const webImage = "kubetest/web:1"

// cluster starts the shared cluster with the web image registered.
func cluster(t *testing.T) *Cluster {
	t.Helper()
	c := Start(t)
	c.Node().Image(webImage, []string{os.Args[0], "serve-pod", "$(POD_IP):8080"})
	return c
}

// waitFor polls cond until it holds, up to a limit that only guards
// against a hang.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !testbin.Poll(90*time.Second, 100*time.Millisecond, cond) {
		t.Fatalf("gave up waiting for %s", what)
	}
}

func mustDo(t *testing.T, c *Cluster, method, path string, body, out any) {
	t.Helper()
	if err := c.Do(context.Background(), method, path, body, out); err != nil {
		t.Fatal(err)
	}
}

type podList struct {
	Items []struct {
		Metadata struct {
			Name string `json:"name"`
			UID  string `json:"uid"`
		} `json:"metadata"`
		Status struct {
			Phase             string            `json:"phase"`
			PodIP             string            `json:"podIP"`
			HostIP            string            `json:"hostIP"`
			Conditions        []podCondition    `json:"conditions"`
			ContainerStatuses []containerStatus `json:"containerStatuses"`
		} `json:"status"`
	} `json:"items"`
}

func pods(t *testing.T, c *Cluster, ns string) podList {
	t.Helper()
	var l podList
	mustDo(t, c, http.MethodGet, "/api/v1/namespaces/"+ns+"/pods", nil, &l)
	return l
}

func ready(conds []podCondition) bool {
	for _, c := range conds {
		if c.Type == "Ready" {
			return c.Status == "True"
		}
	}
	return false
}

func webContainer(probe bool) map[string]any {
	ctr := map[string]any{"name": "web", "image": webImage, "ports": []any{map[string]any{"name": "http", "containerPort": 8080}}}
	if probe {
		ctr["readinessProbe"] = map[string]any{"httpGet": map[string]any{"path": "/healthz", "port": "http"}, "periodSeconds": 1}
	}
	return ctr
}

// A Deployment scaled from 0 to 1 through the scale subresource gets a
// Running, Ready pod whose own address answers from a real process; a
// Service's EndpointSlice lists it; scaled back to 0, the pod is gone and
// its process has exited.
func TestDeploymentScaledUpAndDown(t *testing.T) {
	c := cluster(t)
	ns := c.Namespace(t)
	labels := map[string]string{"app": "web"}
	mustDo(t, c, http.MethodPost, "/apis/apps/v1/namespaces/"+ns+"/deployments", map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web"},
		"spec": map[string]any{
			"replicas": 0,
			"selector": map[string]any{"matchLabels": labels},
			"template": map[string]any{
				"metadata": map[string]any{"labels": labels},
				"spec":     map[string]any{"containers": []any{webContainer(true)}, "terminationGracePeriodSeconds": 5},
			},
		},
	}, nil)
	mustDo(t, c, http.MethodPost, "/api/v1/namespaces/"+ns+"/services", map[string]any{
		"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "web"},
		"spec": map[string]any{"selector": labels, "ports": []any{map[string]any{"port": 80, "targetPort": "http"}}},
	}, nil)

	began := time.Now()
	mustDo(t, c, http.MethodPatch, "/apis/apps/v1/namespaces/"+ns+"/deployments/web/scale", map[string]any{"spec": map[string]any{"replicas": 1}}, nil)
	var l podList
	waitFor(t, "a Running, Ready pod", func() bool {
		l = pods(t, c, ns)
		return len(l.Items) == 1 && l.Items[0].Status.Phase == "Running" && ready(l.Items[0].Status.Conditions)
	})
	t.Logf("scale 0->1: pod ready in %v", time.Since(began).Round(time.Millisecond))
	p := l.Items[0]
	if p.Status.PodIP == "" || p.Status.HostIP != HostIP {
		t.Fatalf("podIP %q hostIP %q", p.Status.PodIP, p.Status.HostIP)
	}
	cs := p.Status.ContainerStatuses
	if len(cs) != 1 || !cs[0].Ready || cs[0].State.Running == nil || cs[0].Image != webImage {
		t.Fatalf("container statuses: %+v", cs)
	}
	resp, err := http.Get("http://" + net.JoinHostPort(p.Status.PodIP, "8080") + "/")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]string
	_ = json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if got["pod"] != p.Metadata.Name || got["image"] != webImage || got["ip"] != p.Status.PodIP {
		t.Fatalf("the pod answered %v, want pod %s image %s ip %s", got, p.Metadata.Name, webImage, p.Status.PodIP)
	}

	if strings.HasPrefix(p.Status.PodIP, loopPrefix) {
		t.Logf("pods are on %s: the API server refuses loopback endpoints, so the EndpointSlice check is left out (run as root)", loopPrefix)
	} else {
		waitFor(t, "the Service's EndpointSlice to list the ready pod", func() bool {
			var sl struct {
				Items []struct {
					Endpoints []struct {
						Addresses  []string `json:"addresses"`
						Conditions struct {
							Ready *bool `json:"ready"`
						} `json:"conditions"`
					} `json:"endpoints"`
				} `json:"items"`
			}
			mustDo(t, c, http.MethodGet, "/apis/discovery.k8s.io/v1/namespaces/"+ns+"/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Dweb", nil, &sl)
			for _, s := range sl.Items {
				for _, e := range s.Endpoints {
					if len(e.Addresses) > 0 && e.Addresses[0] == p.Status.PodIP && e.Conditions.Ready != nil && *e.Conditions.Ready {
						return true
					}
				}
			}
			return false
		})
	}

	began = time.Now()
	mustDo(t, c, http.MethodPatch, "/apis/apps/v1/namespaces/"+ns+"/deployments/web/scale", map[string]any{"spec": map[string]any{"replicas": 0}}, nil)
	waitFor(t, "no pod left", func() bool { return len(pods(t, c, ns).Items) == 0 })
	t.Logf("scale 1->0: pod gone in %v", time.Since(began).Round(time.Millisecond))
	for _, pr := range c.Node().Processes() {
		if pr.UID == p.Metadata.UID && !pr.Exited {
			t.Fatalf("process %d of the deleted pod still runs", pr.PID)
		}
	}
	if _, err := net.DialTimeout("tcp", net.JoinHostPort(p.Status.PodIP, "8080"), time.Second); err == nil {
		t.Fatal("the deleted pod's address still answers")
	}
}

// A container whose image the node does not have waits with reason
// ErrImagePull, then ImagePullBackOff, naming the image; once the image is
// registered the container starts.
func TestUnknownImageFailsToPull(t *testing.T) {
	c := cluster(t)
	ns := c.Namespace(t)
	image := "kubetest/missing:" + ns
	mustDo(t, c, http.MethodPost, "/api/v1/namespaces/"+ns+"/pods", map[string]any{
		"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "lost"},
		"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": image}}},
	}, nil)
	for _, reason := range []string{"ErrImagePull", "ImagePullBackOff"} {
		waitFor(t, reason, func() bool {
			l := pods(t, c, ns)
			if len(l.Items) != 1 || len(l.Items[0].Status.ContainerStatuses) != 1 {
				return false
			}
			w := l.Items[0].Status.ContainerStatuses[0].State.Waiting
			if w != nil && w.Reason == reason {
				if !strings.Contains(w.Message, image) {
					t.Fatalf("%s message %q does not name the image", reason, w.Message)
				}
				if l.Items[0].Status.Phase != "Pending" {
					t.Fatalf("phase %s, want Pending", l.Items[0].Status.Phase)
				}
				return true
			}
			return false
		})
	}
	c.Node().Image(image, []string{os.Args[0], "serve-pod", "$(POD_IP):8080"})
	waitFor(t, "the container to run once the image is there", func() bool {
		l := pods(t, c, ns)
		return len(l.Items) == 1 && l.Items[0].Status.Phase == "Running"
	})
}

// A container that exits is restarted (restartPolicy Always): the restart
// count goes up and lastState holds the exit code.
func TestExitedContainerIsRestarted(t *testing.T) {
	c := cluster(t)
	ns := c.Namespace(t)
	mustDo(t, c, http.MethodPost, "/api/v1/namespaces/"+ns+"/pods", map[string]any{
		"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "crashy"},
		"spec": map[string]any{"containers": []any{webContainer(true)}},
	}, nil)
	var l podList
	waitFor(t, "a ready pod", func() bool {
		l = pods(t, c, ns)
		return len(l.Items) == 1 && ready(l.Items[0].Status.Conditions)
	})
	resp, err := http.Get("http://" + net.JoinHostPort(l.Items[0].Status.PodIP, "8080") + "/exit?code=3")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waitFor(t, "a restart, ready again", func() bool {
		l = pods(t, c, ns)
		if len(l.Items) != 1 || len(l.Items[0].Status.ContainerStatuses) != 1 {
			return false
		}
		cs := l.Items[0].Status.ContainerStatuses[0]
		return cs.RestartCount == 1 && cs.Ready && cs.LastState.Terminated != nil
	})
	cs := l.Items[0].Status.ContainerStatuses[0]
	if term := cs.LastState.Terminated; term.ExitCode != 3 || term.Reason != "Error" {
		t.Fatalf("lastState.terminated = %+v, want exit code 3, reason Error", term)
	}
	starts := 0
	for _, p := range c.Node().Processes() {
		if p.UID == l.Items[0].Metadata.UID {
			starts++
		}
	}
	if starts != 2 {
		t.Fatalf("%d starts of the pod's container, want 2", starts)
	}
}

// A token user with no Role gets 403; bound to a Role that allows listing
// pods in the namespace, the same call passes, through a kubeconfig
// written for that token.
func TestTokenUserHasNoRightsUntilBound(t *testing.T) {
	c := cluster(t)
	ns := c.Namespace(t)
	path := "/api/v1/namespaces/" + ns + "/pods"
	for _, user := range Users {
		cl, err := newClient(c.Server, c.CAFile, c.Token(user))
		if err != nil {
			t.Fatal(err)
		}
		err = cl.do(context.Background(), http.MethodGet, path, nil, nil)
		if !IsStatus(err, http.StatusForbidden) {
			t.Fatalf("%s listing pods: %v, want 403", user, err)
		}
	}
	mustDo(t, c, http.MethodPost, "/apis/rbac.authorization.k8s.io/v1/namespaces/"+ns+"/roles", map[string]any{
		"metadata": map[string]any{"name": "pod-reader"},
		"rules":    []any{map[string]any{"apiGroups": []string{""}, "resources": []string{"pods"}, "verbs": []string{"list"}}},
	}, nil)
	mustDo(t, c, http.MethodPost, "/apis/rbac.authorization.k8s.io/v1/namespaces/"+ns+"/rolebindings", map[string]any{
		"metadata": map[string]any{"name": "wakegate-reads-pods"},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
		"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "wakegate"}},
	}, nil)
	kc, err := os.ReadFile(c.Kubeconfig(t, c.Token("wakegate")))
	if err != nil || !strings.Contains(string(kc), c.Token("wakegate")) || !strings.Contains(string(kc), c.Server) {
		t.Fatalf("kubeconfig: %v\n%s", err, kc)
	}
	cl, _ := newClient(c.Server, c.CAFile, c.Token("wakegate"))
	waitFor(t, "the binding to take effect", func() bool {
		return cl.do(context.Background(), http.MethodGet, path, nil, nil) == nil
	})
	other, _ := newClient(c.Server, c.CAFile, c.Token("wakegate-2"))
	if err := other.do(context.Background(), http.MethodGet, path, nil, nil); !IsStatus(err, http.StatusForbidden) {
		t.Fatalf("wakegate-2 listing pods: %v, want 403", err)
	}
}

func TestExpand(t *testing.T) {
	env := map[string]string{"POD_IP": "127.0.0.10", "EMPTY": ""}
	for in, want := range map[string]string{
		"$(POD_IP):8080":      "127.0.0.10:8080",
		"$$(POD_IP)":          "$(POD_IP)",
		"$(MISSING)":          "$(MISSING)",
		"a$(EMPTY)b":          "ab",
		"$(POD_IP":            "$(POD_IP",
		"cost $5 $$":          "cost $5 $",
		"$()":                 "$()",
		"x$(POD_IP)$(POD_IP)": "x127.0.0.10127.0.0.10",
	} {
		if got := expand(in, env); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}
