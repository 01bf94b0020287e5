package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
)

// The store's disk refusing writes, on a real small filesystem: a tmpfs
// mounted for the test under the gateway's data_dir, remounted read-only,
// or filled up. Mounting needs root (CAP_SYS_ADMIN); elsewhere the tests
// skip, saying so.

// mountTmpfs mounts a tmpfs of size (mount's size=, "4m") at dir, and
// unmounts it when the test ends. It skips the test where mounting is not
// allowed.
func mountTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs for the store's disk needs root")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("this machine does not allow mounting a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		// Homes are stopped by then (ServeIn's cleanup runs first).
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
}

// mountExt4 mounts a new ext4 filesystem of 64 MiB, in a file looped as a
// block device, at dir with errors=remount-ro, as a server's disk is, and
// unmounts it (detaching the loop device) when the test ends. It returns
// the name ext4 knows it by under /sys/fs/ext4. It skips the test where
// that is not allowed.
func mountExt4(t *testing.T, dir string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a filesystem for the store's disk needs root")
	}
	img := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 64<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", img).CombinedOutput(); err != nil {
		t.Skipf("no ext4 filesystem can be made here: %v: %s", err, out)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-o", "loop,errors=remount-ro", img, dir).CombinedOutput(); err != nil {
		t.Skipf("this machine does not allow a loop mount: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	src, err := exec.Command("findmnt", "-no", "SOURCE", dir).Output()
	if err != nil {
		t.Fatalf("findmnt %s: %v", dir, err)
	}
	return filepath.Base(strings.TrimSpace(string(src)))
}

// ext4Error makes the ext4 filesystem dev report an error, as a failing
// disk does: mounted errors=remount-ro, it turns read-only at once, under
// every open file, and stays so until it is checked and mounted again.
func ext4Error(t *testing.T, dev string) {
	t.Helper()
	if err := os.WriteFile("/sys/fs/ext4/"+dev+"/trigger_fs_error", []byte("test: disk error\n"), 0o200); err != nil {
		t.Skipf("ext4 cannot be made to fail here: %v", err)
	}
}

// diskAnswer is one answer a caller got: status, error code (if any) and
// how long it took.
type diskAnswer struct {
	status int
	code   string
	took   time.Duration
	body   string
}

func (a diskAnswer) String() string {
	return fmt.Sprintf("%d %s in %s", a.status, a.code, a.took.Round(time.Millisecond))
}

// diskDo sends one request and reads its answer.
func diskDo(t *testing.T, c *http.Client, method, url string, body string) diskAnswer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+admToken)
	start := time.Now()
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	a := diskAnswer{status: res.StatusCode, took: time.Since(start), body: string(raw)}
	var eb struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &eb) == nil {
		a.code = eb.Error.Code
	}
	return a
}

// diskGatewayConfig is a gateway with two config homes (warm and cold),
// an admin listener at adminAddr and a ready timeout far longer than any
// answer the tests accept.
func diskGatewayConfig(adminAddr string) string {
	return fmt.Sprintf(`listen: "%%ADDR%%"
data_dir: "%%DATA%%"
log:
  access: false
wake:
  idle_timeout: 0s
  ready_timeout: 30s
admin:
  listen: %q
  tokens: [%q]
homes:
  - id: warm
  - id: cold
  - id: cold2
`, adminAddr, admToken)
}

// diskGateway is a running gateway of diskGatewayConfig: the process, a
// client, its public and admin base URLs and its data_dir.
type diskGateway struct {
	p        *testbin.Proc
	c        *http.Client
	pub, adm string
	data     string
}

// startDiskGateway runs a gateway of diskGatewayConfig in a temp dir,
// after mount (nil: nothing) has prepared its data_dir.
func startDiskGateway(t *testing.T, mount func(data string)) diskGateway {
	t.Helper()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if mount != nil {
		mount(data)
	}
	adminAddr := fmt.Sprintf("127.0.0.1:%d", testbin.FreePort(t))
	p := testbin.ServeIn(t, dir, diskGatewayConfig(adminAddr))
	return diskGateway{p: p, c: e2eClient(t), pub: "http://" + p.Addr, adm: "http://" + adminAddr, data: data}
}

// TestStoreReadOnlyDisk turns the store's disk read-only under a running
// gateway (an ext4 error with errors=remount-ro): warm homes keep
// serving, /readyz answers 503 "degraded: store unwritable", a cold wake
// and an admin write fail fast with 503 store_unavailable (no backoff:
// the next wake gets the same answer, not wake_backoff), and the state is
// logged once, not at every failed write. (Such a disk needs a check and a
// new mount; TestStoreFullDisk shows readiness coming back.)
func TestStoreReadOnlyDisk(t *testing.T) {
	var dev string
	g := startDiskGateway(t, func(data string) { dev = mountExt4(t, data) })
	p, c, pub, adm := g.p, g.c, g.pub, g.adm
	if a := diskDo(t, c, "GET", pub+"/node/warm/", ""); a.status != http.StatusOK {
		t.Fatalf("warm home before: %v %s", a, a.body)
	}

	ext4Error(t, dev)
	// An admin write finds the disk read-only at once.
	put := diskDo(t, c, "PUT", adm+"/admin/homes/dyn", `{"idle_timeout":"0s"}`)
	t.Logf("read-only: admin PUT home: %v", put)
	if put.status != http.StatusServiceUnavailable || put.code != "store_unavailable" || !strings.Contains(put.body, "read-only file system") {
		t.Fatalf("admin PUT on a read-only store: %v %s; want 503 store_unavailable with the cause", put, put.body)
	}
	ready := diskDo(t, c, "GET", pub+"/readyz", "")
	t.Logf("read-only: /readyz: %d %q", ready.status, ready.body)
	if ready.status != http.StatusServiceUnavailable || ready.body != "degraded: store unwritable\n" {
		t.Fatalf("/readyz on a read-only store: %d %q", ready.status, ready.body)
	}
	for i, home := range []string{"cold", "cold", "cold2"} {
		a := diskDo(t, c, "GET", pub+"/node/"+home+"/", "")
		t.Logf("read-only: cold wake %d of %s: %v", i+1, home, a)
		// Far less than the 30 s ready timeout: the wake did not retry
		// its writes; and the same code again: no backoff was set.
		if a.status != http.StatusServiceUnavailable || a.code != "store_unavailable" || a.took > 15*time.Second {
			t.Fatalf("cold wake %d of %s on a read-only store: %v %s", i+1, home, a, a.body)
		}
	}
	if st := diskDo(t, c, "GET", adm+"/admin/status", ""); !strings.Contains(st.body, `"degraded": "store unwritable: `) {
		t.Fatalf("admin status on a read-only store: %v %s", st, st.body)
	}
	sus := diskDo(t, c, "POST", adm+"/admin/homes/warm/suspend", "")
	t.Logf("read-only: admin suspend: %v", sus)
	if sus.status != http.StatusServiceUnavailable || sus.code != "store_unavailable" {
		t.Fatalf("admin suspend on a read-only store: %v %s", sus, sus.body)
	}
	// The warm home serves on, past its warm verdict (10 s) too: proven
	// again from what this gateway knows.
	for _, wait := range []time.Duration{0, 11 * time.Second} {
		time.Sleep(wait)
		if a := diskDo(t, c, "GET", pub+"/node/warm/", ""); a.status != http.StatusOK {
			t.Fatalf("warm home %s into the read-only disk: %v %s", wait, a, a.body)
		}
	}
	out := p.Output()
	if n := strings.Count(out, `msg="store unwritable`); n != 1 {
		t.Fatalf("store unwritable logged %d times, want once:\n%s", n, out)
	}
	if strings.Contains(out, `msg="report sessions"`) {
		t.Fatalf("the session report's failure is logged at every report:\n%s", out)
	}
}

// fillDisk writes zeros to dir/filler until the filesystem is full, and
// returns the filler's path.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for i := 0; i < 1<<14; i++ { // at most 1 GiB: far more than the disk
		if _, err := f.Write(chunk); err != nil {
			if !strings.Contains(err.Error(), "no space left") {
				t.Fatalf("fill %s: %v", dir, err)
			}
			// The last bytes too, a page at a time.
			for _, err := f.Write(chunk[:4096]); err == nil; _, err = f.Write(chunk[:4096]) {
			}
			return path
		}
	}
	t.Fatalf("%s did not fill up", dir)
	return ""
}

// TestStoreFullDisk fills the store's disk (a small tmpfs) under a running
// gateway and registers homes until the store cannot grow: that write and
// those after it answer 503 store_unavailable with the cause, never a bare
// 500; a cold wake answers at once (ready, or 503 store_unavailable), not
// after the ready timeout; warm homes serve. Once space is freed,
// /readyz answers 200 by itself and writes pass again.
func TestStoreFullDisk(t *testing.T) {
	g := startDiskGateway(t, func(data string) { mountTmpfs(t, data, "8m") })
	p, c, pub, adm, data := g.p, g.c, g.pub, g.adm, g.data
	if a := diskDo(t, c, "GET", pub+"/node/warm/", ""); a.status != http.StatusOK {
		t.Fatalf("warm home before: %v %s", a, a.body)
	}
	filler := fillDisk(t, data)
	var refused diskAnswer
	n := 0
	for ; n < 2000; n++ {
		// Records of some size, so that the store must grow soon.
		a := diskDo(t, c, "PUT", fmt.Sprintf("%s/admin/homes/dyn%d", adm, n),
			fmt.Sprintf(`{"idle_timeout":"0s","env":["PAD=%s"]}`, strings.Repeat("x", 2000)))
		if a.status != http.StatusCreated {
			refused = a
			break
		}
	}
	ready := diskDo(t, c, "GET", pub+"/readyz", "")
	t.Logf("full: %d homes registered, then admin PUT %v; /readyz then: %d %q", n, refused, ready.status, ready.body)
	if refused.status != http.StatusServiceUnavailable || refused.code != "store_unavailable" || !strings.Contains(refused.body, "no space left") {
		t.Fatalf("admin PUT on a full store: %v %s; want 503 store_unavailable with the cause", refused, refused.body)
	}
	cold := diskDo(t, c, "GET", pub+"/node/cold/", "")
	t.Logf("full: cold wake: %v", cold)
	// Under a root gateway a home's first start records its own uid in
	// data_dir: on a full disk that start fails at once (wake_failed).
	unavailable := cold.status == http.StatusServiceUnavailable && (cold.code == "store_unavailable" || cold.code == "wake_failed")
	if cold.status != http.StatusOK && !unavailable || cold.took > 15*time.Second {
		t.Fatalf("cold wake on a full store: %v %s; want 200 or 503 store_unavailable (wake_failed), before the 30 s ready timeout", cold, cold.body)
	}
	if a := diskDo(t, c, "GET", pub+"/node/warm/", ""); a.status != http.StatusOK {
		t.Fatalf("warm home on a full disk: %v %s", a, a.body)
	}
	// A few probes later the disk is still full: a small write that fits
	// in the file's free pages does not make the store ready again.
	time.Sleep(2500 * time.Millisecond)
	if a := diskDo(t, c, "GET", pub+"/readyz", ""); a.status != http.StatusServiceUnavailable {
		t.Fatalf("/readyz with the disk still full: %v %q", a, a.body)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	testbin.Eventually(t, "/readyz 200 once space is freed", func() bool {
		return diskDo(t, c, "GET", pub+"/readyz", "").status == http.StatusOK
	})
	t.Logf("space freed: /readyz 200 after %s", time.Since(start).Round(time.Millisecond))
	if a := diskDo(t, c, "PUT", fmt.Sprintf("%s/admin/homes/dyn%d", adm, n), `{"idle_timeout":"0s"}`); a.status != http.StatusCreated {
		t.Fatalf("admin PUT once space is freed: %v %s", a, a.body)
	}
	out := p.Output()
	if down, up := strings.Count(out, `msg="store unwritable`), strings.Count(out, `msg="store writable again`); down < 1 || down != up {
		t.Fatalf("logged unwritable %d and writable again %d times, want one each per change:\n%s", down, up, out)
	}
}
