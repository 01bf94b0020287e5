package docker_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
)

// The runtime's own health in the wake (DESIGN rule 11): Podman runs no
// health check timer on these machines (no systemd), so the tests run
// each check themselves with podman healthcheck run.

var healthImages sync.Map // tag -> error, once built

// healthImage builds imageRepo:tag, image 1 with a HEALTHCHECK running
// check (a command of the test probe), in Docker's image format (an OCI
// image carries no health check). One retry: a single failed run makes
// the container unhealthy.
func (e *engine) healthImage(t *testing.T, tag string, check ...string) {
	t.Helper()
	v, _ := healthImages.LoadOrStore(tag, sync.OnceValue(func() error {
		dir := t.TempDir()
		cmd, _ := json.Marshal(append([]string{"/probe"}, check...))
		file := fmt.Sprintf("FROM %s:1\nHEALTHCHECK --interval=1h --retries=1 CMD %s\n", imageRepo, cmd)
		if err := os.WriteFile(filepath.Join(dir, "Containerfile"), []byte(file), 0o600); err != nil {
			return err
		}
		_, err := e.podman("build", "--format", "docker", "--pull=never", "-t", imageRepo+":"+tag, dir)
		return err
	}))
	if err := v.(func() error)(); err != nil {
		t.Fatal(err)
	}
}

// healthRig serves home h1 (target h1) on image tag.
func healthRig(t *testing.T, tag string, check ...string) *rig {
	r := newRig(t)
	r.e.healthImage(t, tag, check...)
	r.serve(t, r.config("", "", fmt.Sprintf("  - {id: h1, provider: docker, version: %q}\n", tag)))
	return r
}

// answer is a request's outcome through the gateway.
type answer struct {
	code int
	body string
	err  error
}

// send sends req in the background; its answer arrives on the channel.
func send(req *http.Request) <-chan answer {
	ch := make(chan answer, 1)
	go func() {
		res, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
		if err != nil {
			ch <- answer{err: err}
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		ch <- answer{code: res.StatusCode, body: string(b)}
	}()
	return ch
}

// wakeWhileChecked sends GET /node/h1/ and returns once the wake waits for
// the container's health check (the waiting page's phase says
// health-pending) while the home already answers on its port inside the
// container; the request's answer arrives on the channel.
func wakeWhileChecked(t *testing.T, r *rig) (ctr string, done <-chan answer) {
	t.Helper()
	req, err := http.NewRequest("GET", "http://"+r.gw.Addr+"/node/h1/", nil)
	if err != nil {
		t.Fatal(err)
	}
	ch := send(req)
	ctr = r.awaitChecked(t, "")
	select {
	case a := <-ch:
		t.Fatalf("the request was answered (%d %q, %v) before the health check passed", a.code, a.body, a.err)
	case <-time.After(500 * time.Millisecond):
	}
	if p := r.phase(t); p != "health-pending" {
		t.Fatalf("phase %q while the health check has not run, want health-pending", p)
	}
	return ctr, ch
}

// awaitChecked waits until h1's wake (or roll) waits for the health check
// of its container on version ("": its only container) while the home
// already answers on its port inside it, and returns that container.
func (r *rig) awaitChecked(t *testing.T, version string) (id string) {
	t.Helper()
	testbin.Eventually(t, "the wake waiting in health-pending while the home listens", func() bool {
		if r.phase(t) != "health-pending" {
			return false
		}
		cs := r.e.containers(t, r.name)
		if version == "" && len(cs) != 1 {
			return false
		}
		for _, c := range cs {
			if (version == "" || c.Version == version) && c.State == "running" {
				_, open := r.e.inContainer(t, c.ID, "dial", "127.0.0.1:8080")
				id = c.ID
				return open
			}
		}
		return false
	})
	return id
}

// phase is the phase of h1's wake as the waiting page's status says it.
func (r *rig) phase(t *testing.T) string {
	t.Helper()
	var s struct {
		Phase string `json:"phase"`
	}
	code, body := r.get(t, "/_wakegate/wake/node/h1")
	if code != http.StatusOK || json.Unmarshal([]byte(body), &s) != nil {
		t.Fatalf("wake status: %d %s", code, body)
	}
	return s.Phase
}

// TestGatewayWaitsForHealthCheck: while the container's HEALTHCHECK has
// not passed, the wake waits (health-pending) although the home's port
// answers; once a run of the check passes, the request is answered by the
// home.
func TestGatewayWaitsForHealthCheck(t *testing.T) {
	r := healthRig(t, "checked", "dial", "127.0.0.1:8080")
	ctr, done := wakeWhileChecked(t, r)
	if out, err := r.e.podman("healthcheck", "run", ctr); err != nil {
		t.Fatalf("healthcheck run: %v %s", err, out)
	}
	select {
	case a := <-done:
		if a.err != nil || a.code != http.StatusOK || !strings.Contains(a.body, "version: <code>checked</code>") {
			t.Fatalf("answer after the check passed: %d %q %v\n%s", a.code, a.body, a.err, r.gw.Output())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no answer after the check passed\n%s", r.gw.Output())
	}
}

// TestGatewayFailsUnhealthyContainer: a health check that fails ends the
// wake: the caller gets 503 home_unhealthy with a sentence that carries
// nothing of the check, and the gateway's log names the container and the
// check's output for the operator.
func TestGatewayFailsUnhealthyContainer(t *testing.T) {
	r := healthRig(t, "sick", "write", "/no-such-folder/x")
	ctr, done := wakeWhileChecked(t, r)
	if out, err := r.e.podman("healthcheck", "run", ctr); err == nil {
		t.Fatalf("healthcheck run passed (%s), want a failure", out)
	}
	var a answer
	select {
	case a = <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("no answer after the check failed\n%s", r.gw.Output())
	}
	if a.err != nil || a.code != http.StatusServiceUnavailable || !strings.Contains(a.body, "home_unhealthy") {
		t.Fatalf("answer after the check failed: %d %q %v, want 503 home_unhealthy\n%s", a.code, a.body, a.err, r.gw.Output())
	}
	if strings.Contains(a.body, "no-such-folder") || strings.Contains(a.body, r.name) {
		t.Fatalf("public answer %q carries the check's output or the container's name", a.body)
	}
	testbin.Eventually(t, "the wake's failure logged with the container and the check's output", func() bool {
		out := r.gw.Output()
		return strings.Contains(out, "container "+r.name+"-h1") && strings.Contains(out, "not written: open /no-such-folder/x")
	})
}
