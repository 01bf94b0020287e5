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
// interpreter, not a shim) and the script's path. The test is skipped when
// python3 is missing.
func PythonScript(t testing.TB, name, source string) (python, script string) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is needed for this test's home")
	}
	out, err := exec.Command(py, "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Skipf("python3: %v", err)
	}
	script = filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(script, []byte(source), 0o600); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out)), script
}
