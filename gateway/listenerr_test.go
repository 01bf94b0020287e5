package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/wakegate/wakegate/gateway"
	"github.com/wakegate/wakegate/provider/all"
)

// TestListenFailureSaysTheFix: a public address another process holds
// fails Run with an error naming the address and the config field, and a
// hint that says what to do; a port below 1024 refused for want of
// privilege (tls.http_listen's default :80 run without root) says how to
// get past it.
func TestListenFailureSaysTheFix(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	text := fmt.Sprintf("listen: %q\ndata_dir: %q\n", held.Addr().String(), filepath.Join(t.TempDir(), "data"))
	cfg, err := all.Load("listen.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	err = g.Run(context.Background())
	var le *gateway.ListenError
	if !errors.As(err, &le) || le.Field != "listen" || !strings.Contains(le.Hint(), "another process") {
		t.Fatalf("Run on a held address: %v; want a ListenError on listen with a hint", err)
	}

	denied := &gateway.ListenError{Addr: ":80", Field: "tls.http_listen", Err: &net.OpError{Op: "listen", Net: "tcp",
		Err: &net.AddrError{Err: "denied"}}}
	if denied.Hint() != "" {
		t.Errorf("a hint for an error it does not know: %q", denied.Hint())
	}
	denied.Err = fmt.Errorf("listen tcp :80: bind: %w", syscall.EACCES)
	if h := denied.Hint(); !strings.Contains(h, "tls.http_listen") || !strings.Contains(h, "CAP_NET_BIND_SERVICE") {
		t.Errorf("hint for a privileged port: %q", h)
	}
}
