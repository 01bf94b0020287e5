package gateway_test

import (
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/refresh"
)

// TestAdminRefresh: POST /admin/homes/{id}/refresh on a real gateway. The
// demo home's process is stopped (SIGSTOP) behind the gateway's back; a
// refresh answers what the provider said and what changed, with the home
// as it is afterwards (suspended, no verdict) and its ETag, the write is
// logged with the token's name, and the refresh is counted. An unknown home is 404, no token 401.
// The CLI's `home refresh` prints the same and exits 0, and 1 for an
// unknown home.
func TestAdminRefresh(t *testing.T) {
	t.Parallel()
	a := admStart(t, admDemo, "  auth_failures_per_minute: 1000\n")
	if code, _, body := a.do(t, http.MethodPost, "/admin/homes/demo/wake", admToken, nil, nil); code != http.StatusOK {
		t.Fatalf("wake: %d %s", code, body)
	}
	pids := testbin.HomePIDs(t, filepath.Join(a.data, "homes", "demo"))
	if len(pids) != 1 {
		t.Fatalf("home processes %v, want one", pids)
	}
	if err := syscall.Kill(-pids[0], syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-pids[0], syscall.SIGCONT) })
	testbin.Eventually(t, "the home's process stopped", func() bool { return testbin.ProcState(pids[0]) == 'T' })

	if code, _, _ := a.do(t, http.MethodPost, "/admin/homes/demo/refresh", "", nil, nil); code != http.StatusUnauthorized {
		t.Errorf("refresh without a token: %d, want 401", code)
	}
	if code, _, body := a.do(t, http.MethodPost, "/admin/homes/nope/refresh", admToken, nil, nil); code != http.StatusNotFound ||
		admDecode[admErr](t, body).Error.Code != "home_not_found" {
		t.Errorf("refresh of an unknown home: %d %s, want 404 home_not_found", code, body)
	}
	var v admin.RefreshView
	var hdr http.Header
	testbin.Eventually(t, "a refresh not refused as busy", func() bool {
		code, h, body := a.do(t, http.MethodPost, "/admin/homes/demo/refresh", admToken, nil, nil)
		if code == http.StatusConflict {
			return false
		}
		if code != http.StatusOK {
			t.Fatalf("refresh: %d %s", code, body)
		}
		v, hdr = admDecode[admin.RefreshView](t, body), h
		return true
	})
	r := v.Refresh
	if r.Home != "demo" || r.Before != "running" || r.Provider != "suspended" || r.After != "suspended" ||
		!slices.Contains(r.Changed, refresh.ChangedVerdict) || !slices.Contains(r.Changed, refresh.ChangedStatus) || r.Message == "" {
		t.Errorf("refresh %+v, want running -> suspended with the verdict dropped", r)
	}
	if v.Home.ID != "demo" || v.Home.Status != "suspended" || v.Home.Warm || hdr.Get("ETag") == "" {
		t.Errorf("home after the refresh %+v (ETag %q), want suspended, not warm, with an ETag", v.Home, hdr.Get("ETag"))
	}
	if code, _, body := a.do(t, http.MethodGet, "/metrics", admToken, nil, nil); code != http.StatusOK ||
		!strings.Contains(string(body), `wakegate_refreshes_total{outcome="changed"} 1`) {
		t.Errorf("metrics: %d, want one changed refresh counted:\n%s", code, body)
	}
	lines := a.logs.Lines(`"admin write"`)
	if i := slices.IndexFunc(lines, func(l string) bool {
		return strings.Contains(l, "path=/admin/homes/demo/refresh") && strings.Contains(l, "status=200")
	}); i < 0 || !strings.Contains(lines[i], `token="admin.tokens[0] sha256:`) {
		t.Errorf("no admin write line naming the token for the refresh in %q", lines)
	}
	if lines := a.logs.Lines("refresh"); !slices.ContainsFunc(lines, func(l string) bool {
		return strings.Contains(l, "provider=suspended") && strings.Contains(l, "after=suspended")
	}) {
		t.Errorf("no refresh line with the provider's state in %q", lines)
	}

	env := []string{"WAKEGATE_ADMIN=" + a.host, "WAKEGATE_TOKEN=" + admToken}
	code, out, errs := admRunCLI(t, env, "home", "refresh", "demo")
	if code != 0 || !strings.Contains(out, "home demo: provider says suspended; record suspended -> suspended; changed: nothing") {
		t.Errorf("home refresh demo: exit %d\n%s%s", code, out, errs)
	}
	if code, _, errs := admRunCLI(t, env, "home", "refresh", "nope"); code != 1 || !strings.Contains(errs, "404 home_not_found") {
		t.Errorf("home refresh nope: exit %d %s", code, errs)
	}
	if code, out, _ := admRunCLI(t, env, "home", "--help"); code != 0 || !strings.Contains(out, "refresh") {
		t.Errorf("home --help: exit %d\n%s", code, out)
	}
}
