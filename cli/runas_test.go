package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/wakegate/wakegate/internal/testbin"
)

// TestServeAsRootGivesDataDirAndDrops runs the real binary as root with
// WAKEGATE_RUN_AS, as the image starts on a volume that was formatted
// root-owned (Fly.io): the gateway gives its data directory, and what root
// left in it, to that user, then runs as that user, and serves.
func TestServeAsRootGivesDataDirAndDrops(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the drop from root is what is tested")
	}
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} { // the user must reach data_dir
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(dir, "data")
	lost := filepath.Join(data, "lost+found")
	if err := os.MkdirAll(lost, 0o700); err != nil { // as a new ext4 volume
		t.Fatal(err)
	}
	p := testbin.ServeEnv(t, dir, []string{"WAKEGATE_RUN_AS=65532:65532"}, "listen: \"%ADDR%\"\ndata_dir: \"%DATA%\"\n")
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if (strings.HasPrefix(line, "Uid:") || strings.HasPrefix(line, "Gid:")) && strings.Count(line, "65532") != 4 {
			t.Errorf("the gateway runs with %q, want 65532 throughout", line)
		}
	}
	for _, path := range []string{data, lost, filepath.Join(data, "state.db")} {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if s := st.Sys().(*syscall.Stat_t); s.Uid != 65532 || s.Gid != 65532 {
			t.Errorf("%s belongs to %d:%d, want 65532:65532", path, s.Uid, s.Gid)
		}
	}
}
