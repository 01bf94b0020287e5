package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wakegate/wakegate/config"
	"github.com/wakegate/wakegate/internal/testbin"
)

// TestRuntimeInflightAddDuringWait starts and ends requests while a drain
// waits (under -race this is what a sync.WaitGroup forbids), and checks
// Wait returns only once the count is back at zero.
func TestRuntimeInflightAddDuringWait(t *testing.T) {
	var c rtInflight
	c.Wait() // zero: returns at once
	c.Add(1)
	waited := make(chan struct{})
	go func() {
		c.Wait()
		close(waited)
	}()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				c.Add(1)
				c.Done()
			}
		})
	}
	wg.Wait()
	select {
	case <-waited:
		t.Fatal("Wait returned while a request was still counted")
	default:
	}
	c.Done()
	select {
	case <-waited:
	case <-time.After(20 * time.Second): // a guard against a hang
		t.Fatal("Wait did not return once the count was zero")
	}
	if n := c.n.Load(); n != 0 {
		t.Fatalf("count %d after every Done", n)
	}
}

// TestServeLeavesNothingWhenRequestsOutliveTheWait holds a request in
// flight past the drain grace and past the wait after close (a handler that
// ignores its context): Serve gives up waiting and returns, and no
// goroutine of its own is left behind waiting for that request.
func TestServeLeavesNothingWhenRequestsOutliveTheWait(t *testing.T) {
	before := goleak.IgnoreCurrent()
	cfg, err := config.Load("leak.yaml", []byte(fmt.Sprintf("listen: \"127.0.0.1:0\"\ndata_dir: %q\nserver:\n  drain_grace: 10ms\n",
		filepath.Join(t.TempDir(), "data"))))
	if err != nil {
		t.Fatal(err)
	}
	logs := &testbin.LogBuffer{}
	g, err := New(context.Background(), cfg, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	g.closeWait = 10 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g.inflight.Add(1) // a request that outlives every wait
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- g.Serve(ctx, ln) }()
	if _, err := g.Addr(context.Background()); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if !strings.Contains(logs.String(), "requests still running after close") {
		t.Fatalf("Serve did not report the request that outlived the wait:\n%s", logs.String())
	}
	g.Close()
	// Checked while the request is still counted: a goroutine waiting for
	// the count to reach zero would still be there.
	leak := goleak.Find(before)
	g.inflight.Done()
	if leak != nil {
		t.Fatal(leak)
	}
}
