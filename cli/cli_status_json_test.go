package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

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
