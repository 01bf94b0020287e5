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
// session reports stay in memory.

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
	dir := t.TempDir()
	adminAddr := fmt.Sprintf("127.0.0.1:%d", testbin.FreePort(t))
	p := testbin.ServeIn(t, dir, diskGatewayConfig(adminAddr))
	c := e2eClient(t)
	pub, adm := "http://"+p.Addr, "http://"+adminAddr
	db := filepath.Join(dir, "data", "state.db")
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
