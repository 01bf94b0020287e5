package testbin

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"
)

// Admin calls a gateway's admin API at base (http://host:port) with the
// bearer token, sending body as JSON when it is not nil and decoding the
// JSON answer into out when out is not nil. It returns the status and the
// body; a request that cannot be made fails the test.
func Admin(t testing.TB, base, token, method, path string, body, out any) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatalf("%s %s: encode the body: %v", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := (&http.Client{Timeout: 90 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: read the answer: %v", method, path, err)
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, path, res.StatusCode, b, err)
		}
	}
	return res.StatusCode, string(b)
}

// HomeView is what a test reads of a home in the admin API.
type HomeView struct {
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Version string `json:"version"`
}

// AdminHome reads home id through the admin API at base; anything but 200
// fails the test.
func AdminHome(t testing.TB, base, token, id string) HomeView {
	t.Helper()
	var v HomeView
	if code, body := Admin(t, base, token, http.MethodGet, "/admin/homes/"+id, nil, &v); code != http.StatusOK {
		t.Fatalf("GET home %s: %d %s", id, code, body)
	}
	return v
}
