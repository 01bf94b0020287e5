package gateway_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/internal/testbin"
)

// TestStartNamesAClosedProgram: under a root gateway that gives each exec
// home a user of its own, a home whose program sits in a folder closed to
// other users (as a version manager's shim under /root does) is named at
// start, with the path, what is closed and the ways out, before a first
// request fails with "permission denied"; a home whose program every user
// may run is not.
func TestStartNamesAClosedProgram(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only a root gateway gives homes users of their own")
	}
	base := tempDirForHomeUsers(t)
	shims := filepath.Join(base, "shims")
	if err := os.Mkdir(shims, 0o700); err != nil {
		t.Fatal(err)
	}
	closed := filepath.Join(shims, "server")
	if err := os.WriteFile(closed, []byte("#!/bin/sh\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := testbin.ServeIn(t, base, `
listen: %ADDR%
data_dir: %DATA%
exec: {command: ["/bin/sh", "-c", "exec sleep 60", "{port}"]}
homes:
  - id: shimmed
    command: ["`+closed+`", "{port}"]
  - id: open
    command: ["/bin/sh", "-c", "exec sleep 60", "{port}"]
`)
	testbin.Eventually(t, "the closed program named at start", func() bool {
		return strings.Contains(p.Output(), `msg="exec home's program is closed to the home's user`)
	})
	var line string
	for _, l := range strings.Split(p.Output(), "\n") {
		if strings.Contains(l, "program is closed") {
			if line != "" {
				t.Fatalf("more than one home named:\n%s\n%s", line, l)
			}
			line = l
		}
	}
	for _, want := range []string{"home=shimmed", "program=" + closed, "closed=" + shims, "exec.users.mode off", "chmod o+x"} {
		if !strings.Contains(line, want) {
			t.Fatalf("start warning %q does not name %q", line, want)
		}
	}
}
