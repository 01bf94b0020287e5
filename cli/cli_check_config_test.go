package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckConfigWarnsOpenAdmin checks check-config accepts an admin
// listener on every interface (the container recipe) with a warning, and
// says nothing of a loopback one.
func TestCheckConfigWarnsOpenAdmin(t *testing.T) {
	for listen, warn := range map[string]bool{":8081": true, "0.0.0.0:8081": true, "127.0.0.1:8081": false} {
		p := filepath.Join(t.TempDir(), "c.yaml")
		cfg := "data_dir: " + filepath.Dir(p) + "\nadmin:\n  listen: \"" + listen + "\"\n  tokens: [\"check-config-token-0123456789\"]\n"
		if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		var out, errs bytes.Buffer
		if code := run([]string{"check-config", "--config", p}, &out, &errs); code != 0 {
			t.Fatalf("%s: exit %d\n%s%s", listen, code, out.String(), errs.String())
		}
		if got := strings.Contains(errs.String(), "warning: admin.listen"); got != warn {
			t.Errorf("admin.listen %s: warned %t, want %t\n%s", listen, got, warn, errs.String())
		}
	}
}
