package gateway_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// status says how the processes of exec homes are kept track of, and why:
// what this machine offers. The start log says it too.
func TestStatusSaysContainment(t *testing.T) {
	a := admStart(t, `
wake:
  idle_timeout: 0s
homes:
  - id: alice
`, "")
	code, _, body := a.do(t, "GET", "/admin/status", admToken, nil, nil)
	var st struct {
		Containment string `json:"containment"`
	}
	if err := json.Unmarshal(body, &st); err != nil || code != 200 {
		t.Fatalf("status: %d %s", code, body)
	}
	want := "subreaper: "
	if _, err := os.Stat("/sys/fs/cgroup/unified/cgroup.procs"); err == nil && os.Geteuid() == 0 {
		want = "cgroup: hybrid cgroups (v2 at /sys/fs/cgroup/unified)"
	} else if _, err := os.Stat("/sys/fs/cgroup/cgroup.procs"); err == nil && os.Geteuid() == 0 {
		want = "cgroup: cgroup v2"
	}
	if !strings.HasPrefix(st.Containment, want) {
		t.Errorf("status containment %q, want it to start with %q", st.Containment, want)
	}
	if !strings.Contains(a.logs.String(), "exec: containment of homes") {
		t.Errorf("the start log does not say how homes are contained:\n%s", a.logs.String())
	}
}
