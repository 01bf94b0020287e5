package gateway_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/wakegate/wakegate/internal/testbin"
)

// rdCLIConfig is the real binary's config; HOMES is replaced by the homes.
const rdCLIConfig = `listen: "%ADDR%"
data_dir: "%DATA%"
admin:
  listen: "127.0.0.1:%ADMINPORT%"
  tokens: ["` + admToken + `"]
wake:
  idle_timeout: 0s
homes:
HOMES`

// TestReloadSignalAndCLI runs the real binary: a SIGHUP applies the
// rewritten config file (a new home is served), `wakegate reload` does the
// same through the admin API and prints what changed, and a bad file is
// refused by both with its file and line, changing nothing.
func TestReloadSignalAndCLI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	admin := "127.0.0.1:" + strconv.Itoa(testbin.FreePort(t))
	cfg := func(homes string) string {
		return strings.NewReplacer("%ADMINPORT%", strings.TrimPrefix(admin, "127.0.0.1:"), "HOMES", homes).Replace(rdCLIConfig)
	}
	p := testbin.ServeIn(t, dir, cfg("  - id: one\n"))
	path := filepath.Join(dir, "config.yaml")
	rewrite := func(homes string) {
		t.Helper()
		text := strings.NewReplacer("%ADDR%", p.Addr, "%DATA%", filepath.Join(dir, "data")).Replace(cfg(homes))
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	served := func(target string) bool {
		res, err := http.Get("http://" + p.Addr + "/node/" + target + "/whoami")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	}
	if !served("one") {
		t.Fatal("home one is not served")
	}

	rewrite("  - id: one\n  - id: two\n")
	if err := p.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testbin.Eventually(t, "home two after SIGHUP", func() bool { return served("two") })
	// The reload's line follows the changes it applied.
	testbin.Eventually(t, "the reload's line in the log", func() bool {
		return strings.Contains(p.Output(), `msg="config reloaded"`) && strings.Contains(p.Output(), "homes_added=two")
	})

	env := []string{"WAKEGATE_ADMIN=" + admin, "WAKEGATE_TOKEN=" + admToken}
	rewrite("  - id: one\n  - id: three\n")
	code, out, errs := admRunCLI(t, env, "reload")
	if code != 0 || !strings.Contains(out, "homes added: three") || !strings.Contains(out, "homes removed: two") {
		t.Fatalf("wakegate reload: exit %d\n%s%s", code, out, errs)
	}
	if !served("three") || served("two") {
		t.Fatal("the reload through the CLI did not apply")
	}

	// A bad file: refused by both, nothing changes.
	rewrite("  - id: one\n  - id: Four!\n")
	line := strings.Count(cfg(""), "\n") + 2
	code, out, errs = admRunCLI(t, env, "reload")
	if code != 1 || !strings.Contains(errs, "invalid_config") || !strings.Contains(errs, "config.yaml:"+strconv.Itoa(line)+": homes[1].id") {
		t.Errorf("wakegate reload of a bad file: exit %d\n%s%s", code, out, errs)
	}
	if err := p.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testbin.Eventually(t, "the refused reload in the log", func() bool {
		return strings.Contains(p.Output(), `msg="config reload refused"`)
	})
	if !served("one") || !served("three") {
		t.Error("a refused reload changed the homes")
	}
	if code, out, _ := admRunCLI(t, nil, "reload", "--help"); code != 0 {
		t.Errorf("reload --help: exit %d %s", code, out)
	}
}

// TestReloadRefusesToRemoveEverything runs the real binary with two homes
// and an app: a config file emptied by accident, or one that declares no
// home and no app, is refused by `wakegate reload` with the count and the
// flag that confirms it, and by SIGHUP with a log line saying how to apply
// it; nothing stops. `wakegate reload --allow-remove-all` then applies it.
func TestReloadRefusesToRemoveEverything(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	admin := "127.0.0.1:" + strconv.Itoa(testbin.FreePort(t))
	cfg := strings.NewReplacer("%ADMINPORT%", strings.TrimPrefix(admin, "127.0.0.1:"),
		"HOMES", "  - id: r1\n  - id: r2\napps:\n  - slug: files\n    home: r1\n").Replace(rdCLIConfig)
	p := testbin.ServeIn(t, dir, cfg)
	path := filepath.Join(dir, "config.yaml")
	served := func(target string) bool {
		res, err := http.Get("http://" + p.Addr + "/node/" + target + "/whoami")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	}
	both := func() bool { return served("r1") && served("r2") }
	if !both() {
		t.Fatal("homes r1 and r2 are not served")
	}
	env := []string{"WAKEGATE_ADMIN=" + admin, "WAKEGATE_TOKEN=" + admToken}

	// The file emptied, as `: > config.yaml` does.
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := admRunCLI(t, env, "reload")
	for _, w := range []string{"reload_removes_all", "is empty", "2 homes and 1 app", "r1, r2", "files", "wakegate reload --allow-remove-all"} {
		if code != 1 || !strings.Contains(errs, w) {
			t.Errorf("wakegate reload of an empty file: exit %d, want 1 and %q in\n%s%s", code, w, out, errs)
		}
	}
	if !both() {
		t.Fatal("a refused reload of an empty file stopped homes")
	}
	if err := p.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testbin.Eventually(t, "the refused SIGHUP in the log", func() bool {
		return strings.Contains(p.Output(), `msg="config reload refused"`)
	})
	if log := p.Output(); !strings.Contains(log, "reload_removes_all") || !strings.Contains(log, "wakegate reload --allow-remove-all") {
		t.Errorf("the SIGHUP refusal does not say how to apply the file:\n%s", log)
	}
	if !both() {
		t.Fatal("a refused SIGHUP stopped homes")
	}

	// Settings, but no home and no app.
	noHomes := strings.NewReplacer("%ADDR%", p.Addr, "%DATA%", filepath.Join(dir, "data"),
		"%ADMINPORT%", strings.TrimPrefix(admin, "127.0.0.1:"), "homes:\nHOMES", "").Replace(rdCLIConfig)
	if err := os.WriteFile(path, []byte(noHomes), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs = admRunCLI(t, env, "reload")
	if code != 1 || !strings.Contains(errs, "declares no home and no app") || !strings.Contains(errs, "--allow-remove-all") {
		t.Errorf("wakegate reload of a file without homes and apps: exit %d, want 1 naming the flag\n%s%s", code, out, errs)
	}
	if !both() {
		t.Fatal("a refused reload stopped homes")
	}

	// A confirmation that is not true or false is refused.
	req, err := http.NewRequest(http.MethodPost, "http://"+admin+"/admin/reload?allow_remove_all=maybe", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+admToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest || !both() {
		t.Errorf("allow_remove_all=maybe: status %d, want 400 and nothing changed", res.StatusCode)
	}

	// Confirmed: applied.
	code, out, errs = admRunCLI(t, env, "reload", "--allow-remove-all")
	if code != 0 || !strings.Contains(out, "homes removed: r1, r2") || !strings.Contains(out, "apps removed: files") {
		t.Fatalf("wakegate reload --allow-remove-all: exit %d\n%s%s", code, out, errs)
	}
	if served("r1") || served("r2") {
		t.Error("the confirmed reload left homes served")
	}
}
