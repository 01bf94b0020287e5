package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestAdminBodiesStrict sends every admin route that takes a body the
// bodies the one decoder refuses: each is a 400 naming the key or "body",
// and nothing was registered, held or changed by it.
func TestAdminBodiesStrict(t *testing.T) {
	t.Parallel()
	a := admStart(t, admDemo, "")
	routes := []struct {
		method, path string
		good         string // a body the route accepts, its key first
		key          string // the first key of good, in another case
	}{
		{"PUT", "/admin/homes/strict", `{"target":"strict","idle_timeout":"0s"}`, "Target"},
		{"POST", "/admin/homes/demo/leases", `{"ttl":"1m"}`, "TTL"},
		{"PUT", "/admin/target", `{"version":"2"}`, "Version"},
		{"PUT", "/admin/apps/strict", `{"upstream":"http://127.0.0.1:1"}`, "Upstream"},
	}
	for _, rt := range routes {
		first, rest, _ := strings.Cut(strings.TrimPrefix(rt.good, "{"), ":")
		bodies := []struct{ name, body, field string }{
			{"trailing object", rt.good + ` {"evil":1}`, "body"},
			{"trailing garbage", rt.good + `]`, "body"},
			{"key in another case", `{"` + rt.key + `":` + rest, rt.key},
			{"duplicate key", `{` + first + `:` + strings.TrimSuffix(rest, "}") + `,` + first + `:` + rest, strings.Trim(first, `"`)},
			{"unknown key", `{"evil":1}`, "evil"},
			{"null", `null`, "body"},
			{"array", `[` + rt.good + `]`, "body"},
			{"empty", ``, "body"},
		}
		for _, b := range bodies {
			code, body := admRaw(t, a, rt.method, rt.path, b.body)
			e := admDecode[admErr](t, body)
			if code != http.StatusBadRequest || e.Error.Field != b.field || e.Error.Code != "bad_request" {
				t.Errorf("%s %s with %s (%s): %d %s; want 400 naming %q", rt.method, rt.path, b.name, b.body, code, body, b.field)
			}
		}
		code, body := admRaw(t, a, rt.method, rt.path, `{"x":"`+strings.Repeat("x", 65<<10)+`"}`)
		if e := admDecode[admErr](t, body); code != http.StatusRequestEntityTooLarge || e.Error.Field != "body" {
			t.Errorf("%s %s with a body over the limit: %d %s", rt.method, rt.path, code, body)
		}
	}
	// Nothing was registered, leased or set by the refused bodies.
	for _, p := range []string{"/admin/homes/strict", "/admin/apps/strict", "/admin/target"} {
		if code, _, body := a.do(t, "GET", p, admToken, nil, nil); code != http.StatusNotFound {
			t.Errorf("GET %s after refused bodies: %d %s", p, code, body)
		}
	}
	if code, _, body := a.do(t, "GET", "/admin/homes/demo", admToken, nil, nil); code != http.StatusOK || admDecode[admHome](t, body).Sessions != 0 {
		t.Errorf("demo after refused leases: %d %s", code, body)
	}
	// The good bodies are accepted.
	for _, rt := range routes {
		if code, body := admRaw(t, a, rt.method, rt.path, rt.good); code >= 300 {
			t.Errorf("%s %s with %s: %d %s", rt.method, rt.path, rt.good, code, body)
		}
	}
}

// admRaw sends raw as the body of an admin request with the token.
func admRaw(t *testing.T, a *admGateway, method, path, raw string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, a.admin+path, strings.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+admToken)
	req.Header.Set("Content-Type", "application/json")
	res, err := a.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, path, err)
	}
	return res.StatusCode, b
}
