package cli

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/internal/testbin"
)

// TestFailedHomeShowsExitAndLog: a home whose command exits at once is
// given up on, and its exit status and last log lines reach the gateway's
// log, `wakegate status` and `wakegate home get`, never the public answer.
func TestFailedHomeShowsExitAndLog(t *testing.T) {
	const token = "hint-test-token-0123456789"
	admin := fmt.Sprintf("127.0.0.1:%d", testbin.FreePort(t))
	gw := testbin.Serve(t, fmt.Sprintf(`
listen: "%%ADDR%%"
data_dir: "%%DATA%%"
admin:
  listen: %q
  tokens: [%q]
exec:
  command: ["sh", "-c", "echo 'no module named flask' >&2; exit 3"]
homes:
  - id: bad
`, admin, token))
	res, err := http.Get("http://" + gw.Addr + "/node/bad/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || strings.Contains(string(body), "flask") || strings.Contains(string(body), "exit status") {
		t.Fatalf("public answer %d %q: want 503 without the home's output", res.StatusCode, body)
	}
	want := []string{"exit status 3", "no module named flask"}
	var out bytes.Buffer
	testbin.Eventually(t, "wakegate status to show the failed home", func() bool {
		out.Reset()
		var errb bytes.Buffer
		run([]string{"status", "--admin", admin, "--token", token}, &out, &errb)
		return strings.Contains(out.String(), "home bad failed: ")
	})
	for _, w := range want {
		if !strings.Contains(out.String(), w) {
			t.Errorf("status lacks %q:\n%s", w, out.String())
		}
		if !strings.Contains(gw.Output(), w) {
			t.Errorf("gateway log lacks %q", w)
		}
	}
	out.Reset()
	var errb bytes.Buffer
	if code := run([]string{"home", "get", "bad", "--admin", admin, "--token", token}, &out, &errb); code != 0 {
		t.Fatalf("home get: exit %d: %s", code, errb.String())
	}
	for _, w := range want {
		if !strings.Contains(out.String(), w) {
			t.Errorf("home get lacks %q:\n%s", w, out.String())
		}
	}
}
