package gateway_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// status lists, without calling the instance unhealthy, that path routing
// serves homes of several owners on one origin; the start log says it too.
func TestStatusWarnsOwnersOnOneOrigin(t *testing.T) {
	a := admStart(t, `
wake:
  idle_timeout: 0s
homes:
  - id: alice
  - id: bob
`, "")
	code, _, body := a.do(t, "GET", "/admin/status", admToken, nil, nil)
	var st struct {
		Healthy  bool     `json:"healthy"`
		Warnings []string `json:"warnings"`
	}
	if err := json.Unmarshal(body, &st); err != nil || code != 200 {
		t.Fatalf("status: %d %s", code, body)
	}
	if w := warningsWith(st.Warnings, "path routing serves homes of 2 owners (alice, bob)"); len(w) != 1 ||
		!strings.Contains(w[0], "hosts.nodes_domain") {
		t.Errorf("status warnings %q; want one naming the owners and hosts.nodes_domain", st.Warnings)
	}
	if !st.Healthy {
		t.Errorf("status unhealthy: %s", body)
	}
	if n := strings.Count(a.logs.String(), `level=WARN msg="isolation: path routing serves homes of 2 owners`); n != 1 {
		t.Errorf("%d start log lines warn of the shared origin; want 1", n)
	}
}

// warningsWith returns the warnings that hold part (status may carry
// others, such as the one about exec homes that share the gateway's user).
func warningsWith(warnings []string, part string) []string {
	var out []string
	for _, w := range warnings {
		if strings.Contains(w, part) {
			out = append(out, w)
		}
	}
	return out
}
