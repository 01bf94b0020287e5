package testbin

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// PythonScript writes source to a file named name in a temporary folder
// and returns the real path of python3 (a home's command must name the
// interpreter, not a shim) and the script's path. The script and the
// folders above it are open to other users (0644, o+x up to the system's
// temp folder): a home of a root gateway runs it as a user of its own.
// The test is skipped when python3 is missing.
func PythonScript(t testing.TB, name, source string) (python, script string) {
	t.Helper()
	python = Python(t)
	script = filepath.Join(OpenDir(t), name)
	if err := os.WriteFile(script, []byte(source), 0o644); err != nil {
		t.Fatal(err)
	}
	return python, script
}

// Python returns the real path of a python3 that a home of its own user
// may run: the system's under a root gateway, not a version manager's
// shim under /root. The test is skipped when python3 is missing.
func Python(t testing.TB) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is needed for this test's home")
	}
	if _, serr := os.Stat("/usr/bin/python3"); serr == nil && os.Geteuid() == 0 {
		py = "/usr/bin/python3"
	}
	out, err := exec.Command(py, "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Skipf("python3: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// OpenDir returns a new temporary folder that other users may pass (o+x
// on it and on the folders above it up to the system's temp folder), for
// files a home of its own user must reach.
func OpenDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != filepath.Clean(os.TempDir()) && d != "/"; d = filepath.Dir(d) {
		if st, err := os.Stat(d); err == nil {
			_ = os.Chmod(d, st.Mode().Perm()|0o001)
		}
	}
	return dir
}
