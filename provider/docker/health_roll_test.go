package docker_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
)

// rolledBack fails the test unless home id's only container runs version
// again, the home answers with it through the gateway and its record says
// so: a failed roll was rolled back.
func (r *rig) rolledBack(t *testing.T, id, version string) {
	t.Helper()
	back := r.e.one(t, r.name)
	if back.Version != version || back.State != "running" {
		t.Fatalf("container after the rollback %+v, want version %s running", back, version)
	}
	if code, v := r.version(t, id); code != http.StatusOK || v != version {
		t.Fatalf("after the rollback: %d %q\n%s", code, v, r.gw.Output())
	}
	if h := r.home(t, id); h.Version != version {
		t.Fatalf("home version %q after the rollback, want %s", h.Version, version)
	}
}

// TestGatewayRollFailsUnhealthyRelease: a roll onto a release whose
// container answers on its port and reports the target version, but whose
// HEALTHCHECK fails, is a failed roll (DESIGN rules 10 and 11): the roll
// waits for the check (health-pending), the operator's roll is refused,
// the home is rolled back onto its prior version, and the gateway's log
// names the container and the check's output.
func TestGatewayRollFailsUnhealthyRelease(t *testing.T) {
	r := newRig(t)
	r.e.healthImage(t, "sickroll", "write", "/no-such-folder/roll")
	home := "  - {id: h1, provider: docker, version: \"1\", idle_timeout: 0s}\n"
	r.serve(t, r.config("", "", home))
	if code, v := r.version(t, "h1"); code != http.StatusOK || v != "1" {
		t.Fatalf("version 1: %d %q\n%s", code, v, r.gw.Output())
	}
	r.gw.Stop()

	r.serve(t, r.config("", "roll:\n  mode: lazy\n  target: {version: \"sickroll\"}\n", home))
	req, err := http.NewRequest("POST", r.admin+"/admin/homes/h1/roll", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	done := send(req)
	ctr := r.awaitChecked(t, "sickroll")
	if out, err := r.e.podman("healthcheck", "run", ctr); err == nil {
		t.Fatalf("healthcheck run passed (%s), want a failure", out)
	}
	var a answer
	select {
	case a = <-done:
	case <-time.After(40 * time.Second):
		t.Fatalf("the roll did not end after the check failed\n%s", r.gw.Output())
	}
	if a.err != nil || a.code == http.StatusOK {
		t.Fatalf("roll onto the unhealthy release: %d %s %v, want a failure\n%s", a.code, a.body, a.err, r.gw.Output())
	}
	r.rolledBack(t, "h1", "1")
	testbin.Eventually(t, "rolled_back logged with the container and the check's output", func() bool {
		out := r.gw.Output()
		return strings.Contains(out, "rolled_back") && strings.Contains(out, "container "+r.name+"-h1") &&
			strings.Contains(out, "not written: open /no-such-folder/roll")
	})
}
