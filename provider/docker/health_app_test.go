package docker_test

import (
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/wakegate/wakegate/internal/testbin"
)

// appView is the part of an app's status the admin API answers that
// these tests judge.
type appView struct {
	Phase   string `json:"phase"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	Hint    string `json:"hint"`
}

// appStatus observes app slug now and returns its status.
func (r *rig) appStatus(t *testing.T, slug string) appView {
	t.Helper()
	var v appView
	if code, body := r.adm(t, "POST", "/admin/apps/"+slug+"/refresh", nil, &v); code != http.StatusOK {
		t.Fatalf("refresh app %s: %d %s", slug, code, body)
	}
	return v
}

// sideListener starts a second demo home on 127.0.0.1:9999 inside
// container ctr and returns its host pid; the container's health check
// dials it.
func (r *rig) sideListener(t *testing.T, ctr string) int {
	t.Helper()
	if out, err := r.e.podman("exec", "--detach", ctr, "/wakegate", "demo-home", "--addr", "127.0.0.1:9999",
		"--target", "side", "--version", "side"); err != nil {
		t.Fatalf("start the side listener: %v %s", err, out)
	}
	testbin.Eventually(t, "the side listener open", func() bool {
		_, open := r.e.inContainer(t, ctr, "dial", "127.0.0.1:9999")
		return open
	})
	out, err := r.e.podman("top", ctr, "hpid", "args")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(out, "\n") {
		var pid int
		if strings.Contains(l, "127.0.0.1:9999") {
			if _, err := fmt.Sscan(l, &pid); err == nil {
				return pid
			}
		}
	}
	t.Fatalf("no side listener in the container's processes:\n%s", out)
	return 0
}

// TestAppLadderReadsContainerHealth: the status ladder of an app inside a
// container home reads the container's own HEALTHCHECK (DESIGN rule 11):
// while the wake waits for the check the app is starting/health-pending;
// once the check passes the app is ready; when a later run of the check
// fails, the app is failed/unhealthy, its message carrying the check's
// output and its hint the likely fix, for operators.
func TestAppLadderReadsContainerHealth(t *testing.T) {
	r := newRig(t)
	r.e.healthImage(t, "sidecheck", "dial", "127.0.0.1:9999")
	apps := "apps:\n  - {slug: web, home: h1, kind: ui, strip_prefix: true, health: {path: /healthz}}\n"
	r.serve(t, r.config("", apps, "  - {id: h1, provider: docker, version: \"sidecheck\", idle_timeout: 0s}\n"))

	ctr, done := wakeWhileChecked(t, r)
	testbin.Eventually(t, "the app starting/health-pending while the wake waits for the check", func() bool {
		v := r.appStatus(t, "web")
		return v.Phase == "starting" && v.Reason == "health-pending"
	})
	side := r.sideListener(t, ctr)
	if out, err := r.e.podman("healthcheck", "run", ctr); err != nil {
		t.Fatalf("healthcheck run: %v %s", err, out)
	}
	if a := <-done; a.err != nil || a.code != http.StatusOK {
		t.Fatalf("answer after the check passed: %d %q %v\n%s", a.code, a.body, a.err, r.gw.Output())
	}
	testbin.Eventually(t, "the app ready once the check passed", func() bool {
		return r.appStatus(t, "web").Phase == "ready"
	})

	if err := syscall.Kill(side, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testbin.Eventually(t, "the side listener closed", func() bool {
		_, open := r.e.inContainer(t, ctr, "dial", "127.0.0.1:9999")
		return !open
	})
	if out, err := r.e.podman("healthcheck", "run", ctr); err == nil {
		t.Fatalf("healthcheck run passed (%s), want a failure", out)
	}
	var v appView
	testbin.Eventually(t, "the app failed/unhealthy after the check failed", func() bool {
		v = r.appStatus(t, "web")
		return v.Phase == "failed" && v.Reason == "unhealthy"
	})
	if !strings.Contains(v.Message, "container "+r.name+"-h1") || !strings.Contains(v.Message, "closed: dial tcp 127.0.0.1:9999") || v.Hint == "" {
		t.Fatalf("app after the check failed: %+v, want the container, the check's output and a hint", v)
	}
}
