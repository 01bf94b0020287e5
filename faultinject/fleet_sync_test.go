package faultinject

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/registry/registrytest"
)

// adminSend sends an admin API request with a JSON body (none when body
// is "") and returns its status and answer.
func (g *fiGateway) adminSend(t testing.TB, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, g.admin+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+fiToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b)
}

// mustAdmin is adminSend that fails the test unless the status is one of
// want.
func (g *fiGateway) mustAdmin(t testing.TB, method, path, body string, want ...int) string {
	t.Helper()
	code, out := g.adminSend(t, method, path, body)
	for _, w := range want {
		if code == w {
			return out
		}
	}
	t.Fatalf("%s %s: %d %s, want %v", method, path, code, out, want)
	return ""
}

// appGeneration returns the generation and kind of app slug as g's admin
// API shows it, or 0 when g does not serve it.
func (g *fiGateway) appGeneration(t testing.TB, slug string) (uint64, string) {
	t.Helper()
	code, body := g.adminSend(t, http.MethodGet, "/admin/apps/"+slug, "")
	if code != http.StatusOK {
		return 0, ""
	}
	var v struct {
		Generation uint64 `json:"generation"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("GET /admin/apps/%s: %v: %s", slug, err, body)
	}
	return v.Generation, v.Kind
}

// TestFleetAdminChangesReachEveryInstance changes homes, apps and the
// roll target through gateway A's admin API and watches gateway B follow
// without a restart: a home's new target routes and its old one does not,
// an app's replacement and removal, a home's removal, the target.
func TestFleetAdminChangesReachEveryInstance(t *testing.T) {
	srv := registrytest.StartRedis(t)
	gws := fleetStart(t, srv, 2, fiOptions{admin: true})
	a, b := gws[0], gws[1]
	c := fleetClient()
	status := func(g *fiGateway, path string) int {
		res, _, err := g.get(c, path)
		if err != nil {
			return 0
		}
		return res.StatusCode
	}

	a.mustAdmin(t, http.MethodPut, "/admin/homes/h9", `{"target":"zed"}`, http.StatusCreated)
	testbin.Eventually(t, "the home put on A answers through B", func() bool { return status(b, "/node/zed/whoami") == http.StatusOK })

	a.mustAdmin(t, http.MethodPut, "/admin/homes/h9", `{"target":"zed2"}`, http.StatusOK)
	testbin.Eventually(t, "B routes the home's new target", func() bool { return status(b, "/node/zed2/whoami") == http.StatusOK })
	if code := status(b, "/node/zed/whoami"); code != http.StatusNotFound {
		t.Errorf("B on the home's old target: %d, want 404", code)
	}

	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "up") }))
	t.Cleanup(up.Close)
	a.mustAdmin(t, http.MethodPut, "/admin/apps/shared", `{"upstream":"`+up.URL+`","kind":"ui"}`, http.StatusCreated)
	testbin.Eventually(t, "B serves the app put on A", func() bool { gen, _ := b.appGeneration(t, "shared"); return gen == 1 })
	a.mustAdmin(t, http.MethodPut, "/admin/apps/shared", `{"upstream":"`+up.URL+`","kind":"api"}`, http.StatusOK)
	testbin.Eventually(t, "B serves the app's replacement", func() bool {
		gen, kind := b.appGeneration(t, "shared")
		return gen == 2 && kind == "api"
	})
	a.mustAdmin(t, http.MethodDelete, "/admin/apps/shared", "", http.StatusNoContent, http.StatusOK)
	testbin.Eventually(t, "B no longer serves the app removed on A", func() bool {
		code, _ := b.adminSend(t, http.MethodGet, "/admin/apps/shared", "")
		return code == http.StatusNotFound
	})

	a.mustAdmin(t, http.MethodDelete, "/admin/homes/h9", "", http.StatusNoContent, http.StatusOK)
	testbin.Eventually(t, "B no longer serves the home removed on A", func() bool {
		code, _ := b.adminSend(t, http.MethodGet, "/admin/homes/h9", "")
		return code == http.StatusNotFound && status(b, "/node/zed2/whoami") == http.StatusNotFound
	})

	a.mustAdmin(t, http.MethodPut, "/admin/target", `{"version":"7"}`, http.StatusOK, http.StatusCreated)
	var target struct {
		Version string `json:"version"`
	}
	got := b.mustAdmin(t, http.MethodGet, "/admin/target", "", http.StatusOK)
	if err := json.Unmarshal([]byte(got), &target); err != nil || target.Version != "7" {
		t.Errorf("GET /admin/target on B: %s (%v), want version 7", got, err)
	}
	for _, g := range gws {
		noPanic(t, g.Output())
	}
}
