package faultinject

import (
	"bytes"
	"crypto/rand"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A damaged, emptied or missing store, or a data_dir another gateway uses,
// stops the gateway at start with exit status 1 and a message that names
// the file and what to do: no panic, and the file is left as it was.

// fiSeedStore runs a gateway in dir once: it wakes the demo home (so its
// folder exists under data_dir/homes) and stops it, leaving a store that
// holds the home. It returns the store's path.
func fiSeedStore(t *testing.T, dir string) string {
	t.Helper()
	g := fiStart(t, dir, fiConfig(t, fiOptions{}))
	c := &http.Client{Timeout: 30 * time.Second}
	if res, body, err := g.get(c, fiWhoami); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("seed wake: %v %s", err, body)
	}
	g.stop(t)
	return filepath.Join(g.data, "state.db")
}

func TestStoreDamagedRefusedAtStart(t *testing.T) {
	cases := []struct {
		name string
		// damage changes the seeded store at path.
		damage func(t *testing.T, path string)
		// want are words the refusal must contain, besides the path.
		want []string
	}{
		{"garbage", func(t *testing.T, path string) {
			b := make([]byte, 64<<10)
			_, _ = rand.Read(b)
			writeFile(t, path, b)
		}, []string{"damaged", "backup", "--reset-store"}},
		{"truncated", func(t *testing.T, path string) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, path, b[:len(b)/2])
		}, []string{"damaged", "backup", "--reset-store"}},
		{"truncated to the meta pages", func(t *testing.T, path string) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, path, b[:8192])
		}, []string{"damaged", "backup", "--reset-store"}},
		{"empty", func(t *testing.T, path string) { writeFile(t, path, nil) },
			[]string{"empty", "--reset-store"}},
		{"missing", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}, []string{"missing", "--reset-store"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := fiSeedStore(t, dir)
			tc.damage(t, path)
			before, _ := os.ReadFile(path)
			_, statErr := os.Stat(path)
			code, out := fiRun(t, dir, "serve", "--config", filepath.Join(dir, "config.yaml"))
			noPanic(t, out)
			if code != 1 {
				t.Fatalf("exit status %d, want 1\n%s", code, out)
			}
			for _, w := range append([]string{path}, tc.want...) {
				if !strings.Contains(out, w) {
					t.Errorf("the refusal does not say %q:\n%s", w, out)
				}
			}
			after, err := os.ReadFile(path)
			if os.IsNotExist(statErr) {
				if !os.IsNotExist(err) {
					t.Fatalf("a missing store was created (%v)", err)
				}
				return
			}
			if err != nil || !bytes.Equal(before, after) {
				t.Fatalf("the store was changed: %d bytes before, %d after (%v)", len(before), len(after), err)
			}
		})
	}
}

// With --reset-store an empty or missing store next to existing homes is
// accepted: the operator chose to start afresh.
func TestStoreResetStoreStartsAfresh(t *testing.T) {
	dir := t.TempDir()
	path := fiSeedStore(t, dir)
	writeFile(t, path, nil)
	g := &fiGateway{dir: dir, data: filepath.Join(dir, "data"), config: filepath.Join(dir, "config.yaml")}
	// The config file written by the seed is reused; its listen address
	// is read back from it.
	g.url = "http://" + listenOf(t, g.config)
	g.start(t, "--reset-store")
	c := &http.Client{Timeout: 30 * time.Second}
	if res, body, err := g.get(c, fiWhoami); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("wake after a reset: %v %s", err, body)
	}
	if !strings.Contains(g.Output(), "new, empty store") {
		t.Fatalf("the reset is not in the log:\n%s", g.Output())
	}
}

// A second gateway on the same data_dir says the directory is in use, by
// which pid, and leaves the first one serving.
func TestStoreSecondGatewayRefused(t *testing.T) {
	dir := t.TempDir()
	first := fiStart(t, dir, fiConfig(t, fiOptions{}))
	dir2 := t.TempDir()
	cfg := strings.ReplaceAll(fiConfig(t, fiOptions{}), "%DATA%", first.data)
	second := fiWriteConfig(t, dir2, cfg)
	code, out := fiRun(t, dir2, "serve", "--config", second.config)
	noPanic(t, out)
	if code != 1 {
		t.Fatalf("exit status %d, want 1\n%s", code, out)
	}
	for _, w := range []string{filepath.Join(first.data, "state.db"), "in use", "pid " + strconv.Itoa(first.Cmd.Process.Pid)} {
		if !strings.Contains(out, w) {
			t.Errorf("the refusal does not say %q:\n%s", w, out)
		}
	}
	c := &http.Client{Timeout: 30 * time.Second}
	if res, body, err := first.get(c, fiWhoami); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("the first gateway after the refusal: %v %s", err, body)
	}
}

// store check reads every record of a store and reports problems; store
// backup writes a copy that check accepts and that a gateway starts from.
func TestStoreCheckAndBackup(t *testing.T) {
	dir := t.TempDir()
	path := fiSeedStore(t, dir)
	cfgPath := filepath.Join(dir, "config.yaml")
	code, out := fiRun(t, dir, "store", "check", "--config", cfgPath)
	if code != 0 || !strings.Contains(out, "homes: 1") {
		t.Fatalf("check of a sound store: exit %d\n%s", code, out)
	}
	backup := filepath.Join(t.TempDir(), "backup.db")
	code, out = fiRun(t, dir, "store", "backup", "--config", cfgPath, backup)
	if code != 0 {
		t.Fatalf("backup of a stopped gateway's store: exit %d\n%s", code, out)
	}
	code, out = fiRun(t, dir, "store", "check", "--file", backup)
	if code != 0 || !strings.Contains(out, "homes: 1") {
		t.Fatalf("check of the backup: exit %d\n%s", code, out)
	}
	b := make([]byte, 64<<10)
	_, _ = rand.Read(b)
	writeFile(t, path, b)
	code, out = fiRun(t, dir, "store", "check", "--config", cfgPath)
	noPanic(t, out)
	if code != 1 || !strings.Contains(out, path) {
		t.Fatalf("check of a damaged store: exit %d\n%s", code, out)
	}
	// Restore as docs/store.md says: the backup replaces the damaged file.
	raw, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, raw)
	g := &fiGateway{dir: dir, data: filepath.Join(dir, "data"), config: cfgPath, url: "http://" + listenOf(t, cfgPath)}
	g.start(t)
	c := &http.Client{Timeout: 30 * time.Second}
	if res, body, err := g.get(c, fiWhoami); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("wake after a restore: %v %s", err, body)
	}
}

// An online backup goes through the running gateway's admin API.
func TestStoreBackupOnline(t *testing.T) {
	dir := t.TempDir()
	g := fiStart(t, dir, fiConfig(t, fiOptions{admin: true}))
	c := &http.Client{Timeout: 30 * time.Second}
	if res, body, err := g.get(c, fiWhoami); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("wake: %v %s", err, body)
	}
	backup := filepath.Join(t.TempDir(), "backup.db")
	code, out := fiRun(t, dir, "store", "backup", "--config", g.config, "--admin", g.admin, "--token", fiToken, backup)
	if code != 0 {
		t.Fatalf("online backup: exit %d\n%s", code, out)
	}
	code, out = fiRun(t, dir, "store", "check", "--file", backup)
	if code != 0 || !strings.Contains(out, "homes: 1") {
		t.Fatalf("check of the online backup: exit %d\n%s", code, out)
	}
	// check reads the file itself: with the gateway running it says the
	// store is in use and how to check a copy instead.
	code, out = fiRun(t, dir, "store", "check", "--config", g.config)
	if code != 1 || !strings.Contains(out, "in use") || !strings.Contains(out, "store backup") {
		t.Fatalf("check of a running gateway's store: exit %d\n%s", code, out)
	}
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// listenOf reads the listen address back from a written config.
func listenOf(t *testing.T, config string) string {
	t.Helper()
	raw, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "listen: "); ok {
			return strings.Trim(v, `"' `)
		}
	}
	t.Fatal("no listen address in the config")
	return ""
}
