package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider/all"
)

// TestServeLeavesNothingWhenRequestsOutliveTheWait holds a request in
// flight past the drain grace and past the wait after close (a handler that
// ignores its context): Serve gives up waiting and returns, and no
// goroutine of its own is left behind waiting for that request.
func TestServeLeavesNothingWhenRequestsOutliveTheWait(t *testing.T) {
	before := goleak.IgnoreCurrent()
	cfg, err := all.Load("leak.yaml", []byte(fmt.Sprintf("listen: \"127.0.0.1:0\"\ndata_dir: %q\nserver:\n  drain_grace: 10ms\n",
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
