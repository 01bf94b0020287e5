package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/internal/testbin"
)

// TestStatusJSONWithoutAnswer: `status --json` with no admin listener still
// prints one JSON document on stdout, which says there was no answer and
// why, and keeps exit status 3.
func TestStatusJSONWithoutAnswer(t *testing.T) {
	closed := fmt.Sprintf("127.0.0.1:%d", testbin.FreePort(t))
	var out, errb bytes.Buffer
	code := run([]string{"status", "--json", "--admin", closed, "--token", "status-test-token-0123456789"}, &out, &errb)
	if code != statusNoAnswer {
		t.Errorf("exit %d, want %d", code, statusNoAnswer)
	}
	var doc struct {
		Healthy  *bool  `json:"healthy"`
		Answered *bool  `json:"answered"`
		Admin    string `json:"admin"`
		Error    string `json:"error"`
		Hint     string `json:"hint"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("stdout is not a JSON document (%v):\n%q", err, out.String())
	}
	if doc.Healthy == nil || *doc.Healthy || doc.Answered == nil || *doc.Answered || doc.Error == "" ||
		!strings.Contains(doc.Admin, closed) || doc.Hint == "" {
		t.Errorf("document %s: want healthy and answered false, the admin address, the error and a hint", out.String())
	}
}

// TestStatusSaysEachFactOnce: a failed home whose app failed with it is
// printed with its reason once (not again for its app, nor again as a
// problem), a warning is printed once, and a problem that is not about a
// home or an app listed is still printed.
func TestStatusSaysEachFactOnce(t *testing.T) {
	reason := "pid 7 exit status 1; 3 restarts in 1m0s allowed, giving up; last log lines: boom"
	s := admin.Status{Version: "v", Instance: "i",
		Homes: []admin.HomeView{{ID: "h1", Target: "h1", Status: "failed", Reason: reason}},
		Apps: []admin.AppView{{Slug: "web", Home: "h1", Phase: "failed", Reason: "runtime-failed",
			Message: "home h1 failed: " + reason}},
		Problems: []string{"home h1 is failed: " + reason, "app web is failed: home h1 failed: " + reason,
			"the gateway is draining"},
		Warnings: []string{"homes share the gateway's user"},
	}
	var out bytes.Buffer
	printStatus(&out, s)
	got := out.String()
	if n := strings.Count(got, "giving up"); n != 1 {
		t.Errorf("the home's reason is printed %d times, want once:\n%s", n, got)
	}
	if n := strings.Count(got, "homes share the gateway's user"); n != 1 {
		t.Errorf("the warning is printed %d times, want once:\n%s", n, got)
	}
	for _, want := range []string{"home h1", "app /apps/web/ is failed", "the gateway is draining"} {
		if !strings.Contains(got, want) {
			t.Errorf("status lacks %q:\n%s", want, got)
		}
	}
}
