package testbin

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// removeHomeCgroups ends every process in the cgroups an exec provider
// with data dir dataDir made for its homes (wakegate-<hash of the data
// dir>, in the cgroup v2 of this process, where cgroups are mounted at the
// standard places), and removes those cgroups: a test leaves none behind.
func removeHomeCgroups(dataDir string) {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return
	}
	own := ""
	raw, _ := os.ReadFile("/proc/self/cgroup")
	for line := range strings.SplitSeq(string(raw), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			own = p
		}
	}
	sum := sha256.Sum256([]byte(abs))
	name := "wakegate-" + hex.EncodeToString(sum[:4])
	for _, mount := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		root := filepath.Join(mount, own, name)
		homes, _ := filepath.Glob(filepath.Join(root, "home-*"))
		for _, h := range homes {
			_ = os.WriteFile(filepath.Join(h, "cgroup.kill"), []byte("1"), 0)
			for range 250 {
				ev, _ := os.ReadFile(filepath.Join(h, "cgroup.events"))
				if !strings.Contains(string(ev), "populated 1") {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			runs, _ := filepath.Glob(filepath.Join(h, "run-*"))
			for _, r := range runs {
				_ = syscall.Rmdir(r)
			}
			_ = syscall.Rmdir(h)
		}
		_ = syscall.Rmdir(root)
	}
}
