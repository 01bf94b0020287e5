package gateway_test

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
)

// An idle gateway on the embedded store writes nothing to state.db: its
// session reports stay in memory, and its store watch looks at the disk
// without writing. A read-only or full disk is still noticed by that look,
// with no write to fail.

// idleTicks reads how many idle ticks (each one a session report) the
// gateway whose admin listener is adm has run.
func idleTicks(t *testing.T, c *http.Client, adm string) int {
	t.Helper()
	a := diskDo(t, c, "GET", adm+"/metrics", "")
	if a.status != http.StatusOK {
		t.Fatalf("/metrics: %v", a)
	}
	sc := bufio.NewScanner(strings.NewReader(a.body))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "wakegate_idle_ticks_total "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("wakegate_idle_ticks_total %q: %v", v, err)
			}
			return int(n)
		}
	}
	t.Fatal("/metrics has no wakegate_idle_ticks_total")
	return 0
}

// waitTicks waits until the gateway has run n more idle ticks.
func waitTicks(t *testing.T, c *http.Client, adm string, n int) {
	t.Helper()
	from := idleTicks(t, c, adm)
	testbin.Eventually(t, fmt.Sprintf("%d idle ticks", n), func() bool { return idleTicks(t, c, adm) >= from+n })
}

// TestStoreIdleWritesNothing: across idle ticks, with a home awake and
// without, a gateway on the embedded store commits nothing to state.db
// (its transaction id stays); a wake still writes.
func TestStoreIdleWritesNothing(t *testing.T) {
	g := startDiskGateway(t, nil)
	c, pub, adm := g.c, g.pub, g.adm
	db := filepath.Join(g.data, "state.db")
	idle := func(what string) uint64 {
		t.Helper()
		waitTicks(t, c, adm, 1) // what the start or a wake wrote is done
		before := testbin.BoltTxID(t, db)
		fi0, err := os.Stat(db)
		if err != nil {
			t.Fatal(err)
		}
		waitTicks(t, c, adm, 5)
		after := testbin.BoltTxID(t, db)
		fi1, err := os.Stat(db)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: txid %d -> %d over 5 idle ticks; mtime %s -> %s", what, before, after,
			fi0.ModTime().Format(time.RFC3339Nano), fi1.ModTime().Format(time.RFC3339Nano))
		if after != before || !fi1.ModTime().Equal(fi0.ModTime()) {
			t.Fatalf("%s: state.db was written while the gateway was idle (txid %d -> %d)", what, before, after)
		}
		return after
	}
	asleep := idle("nothing awake")
	if a := diskDo(t, c, "GET", pub+"/node/cold/", ""); a.status != http.StatusOK {
		t.Fatalf("wake: %v %s", a, a.body)
	}
	woke := testbin.BoltTxID(t, db)
	t.Logf("a wake: txid %d -> %d", asleep, woke)
	if woke <= asleep {
		t.Fatalf("a wake wrote nothing to state.db (txid %d)", woke)
	}
	idle("a home awake")
}

// TestStoreReadOnlyDiskNoticedIdle: an idle gateway whose store's disk
// turns read-only (an ext4 error with errors=remount-ro) says so within
// about a second, with no write of its own to fail: /readyz answers 503
// and the log names the cause once.
func TestStoreReadOnlyDiskNoticedIdle(t *testing.T) {
	var dev string
	g := startDiskGateway(t, func(data string) { dev = mountExt4(t, data) })
	p, c, pub := g.p, g.c, g.pub
	if a := diskDo(t, c, "GET", pub+"/readyz", ""); a.status != http.StatusOK {
		t.Fatalf("/readyz before: %v %q", a, a.body)
	}
	ext4Error(t, dev)
	start := time.Now()
	testbin.Eventually(t, "/readyz 503 on a read-only disk", func() bool {
		a := diskDo(t, c, "GET", pub+"/readyz", "")
		return a.status == http.StatusServiceUnavailable && a.body == "degraded: store unwritable\n"
	})
	t.Logf("read-only, idle: /readyz 503 after %s", time.Since(start).Round(time.Millisecond))
	testbin.Eventually(t, "the log line", func() bool { return strings.Contains(p.Output(), `msg="store unwritable`) })
	out := p.Output()
	if n := strings.Count(out, `msg="store unwritable`); n != 1 || !strings.Contains(out, "read-only file system") {
		t.Fatalf("store unwritable logged %d times, want once naming the read-only file system:\n%s", n, out)
	}
}

// TestStoreFullDiskNoticedIdle: an idle gateway whose store's disk fills
// up (a small tmpfs) says so with no write of its own (/readyz 503), and
// ready again once space is freed.
func TestStoreFullDiskNoticedIdle(t *testing.T) {
	g := startDiskGateway(t, func(data string) { mountTmpfs(t, data, "8m") })
	p, c, pub, data := g.p, g.c, g.pub, g.data
	db := filepath.Join(data, "state.db")
	if a := diskDo(t, c, "GET", pub+"/readyz", ""); a.status != http.StatusOK {
		t.Fatalf("/readyz before: %v %q", a, a.body)
	}
	before := testbin.BoltTxID(t, db)
	filler := fillDisk(t, data)
	start := time.Now()
	testbin.Eventually(t, "/readyz 503 on a full disk", func() bool {
		return diskDo(t, c, "GET", pub+"/readyz", "").status == http.StatusServiceUnavailable
	})
	t.Logf("full, idle: /readyz 503 after %s", time.Since(start).Round(time.Millisecond))
	if after := testbin.BoltTxID(t, db); after != before {
		t.Fatalf("state.db written while idle on a full disk: txid %d -> %d", before, after)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	testbin.Eventually(t, "/readyz 200 once space is freed", func() bool {
		return diskDo(t, c, "GET", pub+"/readyz", "").status == http.StatusOK
	})
	t.Logf("space freed: /readyz 200 after %s", time.Since(start).Round(time.Millisecond))
	out := p.Output()
	if down, up := strings.Count(out, `msg="store unwritable`), strings.Count(out, `msg="store writable again`); down != 1 || up != 1 || !strings.Contains(out, "its next growth needs") {
		t.Fatalf("logged unwritable %d and writable again %d times, want once each, naming the free space:\n%s", down, up, out)
	}
}
