package gateway_test

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
)

// storeTestConfig is a gateway with one config home and an admin listener
// at adminAddr that accepts admToken.
func storeTestConfig(adminAddr string) string {
	return fmt.Sprintf(`listen: "%%ADDR%%"
data_dir: "%%DATA%%"
log:
  access: false
wake:
  idle_timeout: 0s
admin:
  listen: %q
  tokens: [%q]
homes:
  - id: cfg
`, adminAddr, admToken)
}

// storeRefused runs `wakegate serve` with args in dir, which must exit 1
// by itself, and returns what it printed.
func storeRefused(t *testing.T, dir string, args ...string) string {
	t.Helper()
	p := testbin.Start(t, dir, nil, append([]string{"serve", "--config", filepath.Join(dir, "config.yaml")}, args...)...)
	err, done := p.Wait(20 * time.Second)
	if !done {
		t.Fatalf("the gateway started on a store it cannot trust\n%s", p.Output())
	}
	if err == nil || p.Cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("exit %v, want 1\n%s", err, p.Output())
	}
	out := p.Output()
	// A refusal at start is one error, not a shutdown.
	if strings.Contains(out, "shutting down") {
		t.Fatalf("a start refusal talks of shutting down:\n%s", out)
	}
	return out
}

// TestStoreUntrustedIsRefusedNotEmptied registers a home through the
// admin API, then damages the store the ways a disk or an operator does:
// emptied (`: > state.db`) and one corrupted byte in the home's record.
// Each start is refused naming the file, the problem and the way out;
// --reset-store moves the refused file aside and starts empty; `store
// drop` removes the bad record and keeps the rest.
func TestStoreUntrustedIsRefusedNotEmptied(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	adminAddr := fmt.Sprintf("127.0.0.1:%d", testbin.FreePort(t))
	cfg := storeTestConfig(adminAddr)
	adm := &admGateway{admin: "http://" + adminAddr, client: e2eClient(t)}
	p := testbin.ServeIn(t, dir, cfg)
	for _, id := range []string{"dyn1", "dyn2"} {
		if code, _, body := adm.do(t, "PUT", "/admin/homes/"+id, admToken, nil, map[string]any{"idle_timeout": "0s"}); code != http.StatusCreated {
			t.Fatalf("register %s: %d %s", id, code, body)
		}
	}
	p.Stop()
	store := filepath.Join(dir, "data", "state.db")
	sound, err := os.ReadFile(store)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("emptied", func(t *testing.T) {
		if err := os.WriteFile(store, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		out := storeRefused(t, dir)
		for _, want := range []string{store + " is empty", "wakegate store backup", "--reset-store"} {
			if !strings.Contains(out, want) {
				t.Fatalf("refusal lacks %q:\n%s", want, out)
			}
		}
		if fi, err := os.Stat(store); err != nil || fi.Size() != 0 {
			t.Fatalf("the refused file was touched: %v %v", fi, err)
		}
	})

	t.Run("one corrupted record byte", func(t *testing.T) {
		bad := bytes.ReplaceAll(sound, []byte(`{"id":"dyn2"`), []byte(`X"id":"dyn2"`))
		if bytes.Equal(bad, sound) {
			t.Fatal("the record of dyn2 is not in the file")
		}
		if err := os.WriteFile(store, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		out := storeRefused(t, dir)
		drop := "wakegate store drop --file " + store + " homes/dyn2"
		if !strings.Contains(out, "homes/dyn2") || !strings.Contains(out, drop) {
			t.Fatalf("refusal does not name the record and %q:\n%s", drop, out)
		}
		dp := testbin.Start(t, dir, nil, "store", "drop", "--file", store, "homes/dyn2")
		if err, done := dp.Wait(20 * time.Second); !done || err != nil {
			t.Fatalf("store drop: %v\n%s", err, dp.Output())
		}
		p := testbin.ServeIn(t, dir, cfg)
		if code, _, body := adm.do(t, "GET", "/admin/homes/dyn1", admToken, nil, nil); code != http.StatusOK {
			t.Fatalf("dyn1 after the drop: %d %s", code, body)
		}
		if code, _, _ := adm.do(t, "GET", "/admin/homes/dyn2", admToken, nil, nil); code != http.StatusNotFound {
			t.Fatalf("dyn2 after the drop: %d, want 404", code)
		}
		p.Stop()
	})

	t.Run("reset-store moves the refused file aside", func(t *testing.T) {
		if err := os.WriteFile(store, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		p := testbin.Start(t, dir, nil, "serve", "--config", filepath.Join(dir, "config.yaml"), "--reset-store")
		testbin.Eventually(t, "the gateway started", func() bool { return strings.Contains(p.Output(), "msg=listening") })
		aside, _ := filepath.Glob(store + ".refused-*")
		if len(aside) != 1 || !strings.Contains(p.Output(), "moved_to="+aside[0]) {
			t.Fatalf("moved aside: %v\n%s", aside, p.Output())
		}
		if code, _, _ := adm.do(t, "GET", "/admin/homes/dyn1", admToken, nil, nil); code != http.StatusNotFound {
			t.Fatalf("dyn1 after a reset: %d, want 404", code)
		}
		p.Stop()
	})
}
