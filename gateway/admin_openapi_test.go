package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	"github.com/wakegate/wakegate/admin"
)

// admSpec is the part of the OpenAPI description the route check reads.
type admSpec struct {
	OpenAPI string                                `json:"openapi"`
	Paths   map[string]map[string]json.RawMessage `json:"paths"`
}

// admSpecOps returns the documented operations as "METHOD /path", and the
// paths served only in some setups (x-wakegate-when).
func admSpecOps(t *testing.T, s admSpec) (ops []string, optional map[string]bool) {
	t.Helper()
	optional = map[string]bool{}
	for p, item := range s.Paths {
		for k := range item {
			switch k {
			case "get", "put", "post", "delete", "patch", "head", "options":
				ops = append(ops, strings.ToUpper(k)+" "+p)
			case "x-wakegate-when":
				optional[p] = true
			}
		}
	}
	sort.Strings(ops)
	return ops, optional
}

// TestAdminOpenAPI checks the admin API's OpenAPI description: it is
// served at /admin/openapi.json, valid OpenAPI 3.1 (libopenapi-validator
// against the specification's schema), names every route the real
// gateway serves, and every operation it names answers on a real gateway
// with something other than the router's 404 or 405, with an answer
// that matches its documented schema.
func TestAdminOpenAPI(t *testing.T) {
	t.Parallel()
	a := admStart(t, admDemo, "  auth_failures_per_minute: 1000\n")
	code, hdr, served := a.do(t, "GET", "/admin/openapi.json", admToken, nil, nil)
	if code != http.StatusOK || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") || !bytes.Equal(served, admin.OpenAPI()) {
		t.Fatalf("GET /admin/openapi.json: %d %s, or not the embedded description", code, hdr.Get("Content-Type"))
	}
	if code, _, _ := a.do(t, "GET", "/admin/openapi.json", "", nil, nil); code != http.StatusUnauthorized {
		t.Errorf("the description without a token: %d, want 401", code)
	}
	doc, err := libopenapi.NewDocument(served)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := doc.BuildV3Model(); err != nil {
		t.Fatalf("build the model: %v", err)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatalf("validator: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, e := range verrs {
			t.Errorf("invalid description: %s: %s", e.Message, e.Reason)
		}
		t.FailNow()
	}
	spec := admDecode[admSpec](t, served)
	if spec.OpenAPI != "3.1.0" {
		t.Fatalf("openapi %q, want 3.1.0", spec.OpenAPI)
	}
	ops, optional := admSpecOps(t, spec)
	documented := map[string]bool{}
	for _, op := range ops {
		documented[op] = true
	}
	served2 := map[string]bool{}
	for _, r := range a.g.AdminRoutes() {
		op := r.Method + " " + r.Pattern
		served2[op] = true
		if !documented[op] {
			t.Errorf("%s is served but not documented", op)
		}
	}
	if len(served2) < 20 {
		t.Fatalf("only %d routes walked: %v", len(served2), a.g.AdminRoutes())
	}
	for _, op := range ops {
		method, path, _ := strings.Cut(op, " ")
		if optional[path] && !served2[op] {
			continue // served in another setup (TLS on, another store)
		}
		t.Run(op, func(t *testing.T) { admCheckOperation(t, a, v, method, path) })
	}
}

// admCheckOperation sends one documented operation to the real gateway
// with real records in its path and checks the router served it, and that
// a JSON answer matches the description.
func admCheckOperation(t *testing.T, a *admGateway, v validator.Validator, method, path string) {
	lease := ""
	if strings.Contains(path, "{lease}") {
		code, _, body := a.do(t, "POST", "/admin/homes/demo/leases", admToken, nil, map[string]string{"ttl": "1m"})
		if code != http.StatusCreated {
			t.Fatalf("lease: %d %s", code, body)
		}
		lease = admDecode[admin.LeaseView](t, body).Lease
	}
	url := strings.NewReplacer("{id}", "demo", "{slug}", "demo", "{file}", "dashboard.js", "{lease}", lease).Replace(path)
	var body []byte
	switch {
	case method == "PUT" && path == "/admin/target":
		body = []byte(`{"version":"2"}`)
	case method == "PUT" && strings.HasPrefix(path, "/admin/apps/"):
		body = []byte(`{"home":"demo","path":"/apps/demo"}`)
	case method == "PUT":
		body = []byte(`{"target":"demo"}`)
	case strings.HasSuffix(path, "/leases"):
		body = []byte(`{"ttl":"1m"}`)
	}
	if strings.HasSuffix(path, "/start") || strings.HasSuffix(path, "/stop") || strings.HasSuffix(path, "/restart") {
		url += "?wait=20s"
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, a.admin+url, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+admToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := a.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	ct := res.Header.Get("Content-Type")
	var got []byte
	if !strings.HasPrefix(ct, "text/event-stream") {
		got, _ = io.ReadAll(res.Body)
	}
	var e admFullErr
	_ = json.Unmarshal(got, &e)
	if res.StatusCode == http.StatusMethodNotAllowed || (res.StatusCode == http.StatusNotFound && e.Error.Code == "not_found") {
		t.Fatalf("%s %s: %d %s: documented but not served", method, url, res.StatusCode, got)
	}
	if !strings.HasPrefix(ct, "application/json") {
		return
	}
	// The answer, as documented.
	res.Body = io.NopCloser(bytes.NewReader(got))
	req.Body = io.NopCloser(bytes.NewReader(body))
	if ok, verrs := v.ValidateHttpResponse(req, res); !ok {
		for _, ve := range verrs {
			msg := ve.Message + ": " + ve.Reason
			for _, se := range ve.SchemaValidationErrors {
				msg += fmt.Sprintf("\n  %s: %s", se.FieldPath, se.Reason)
			}
			t.Errorf("%s %s: %d answer does not match the description: %s\n%s", method, url, res.StatusCode, msg, got)
		}
	}
}
