package edge

import (
	"context"
	"io"
	"net"
	"testing"
)

// TestFramingScanEndsAtUpgrade: the watcher flags a head with both
// framings; once its connection carries a relayed WebSocket (Upgraded),
// it scans nothing more and keeps no scanner.
func TestFramingScanEndsAtUpgrade(t *testing.T) {
	const smuggled = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
	for _, upgraded := range []bool{false, true} {
		client, server := net.Pipe()
		c := Watch(server)
		if upgraded {
			c.(upgradable).Upgraded()
		}
		ctx := ConnContext(context.Background(), c)
		go func() {
			_, _ = io.WriteString(client, smuggled)
			_ = client.Close()
		}()
		if _, err := io.ReadAll(c); err != nil {
			t.Fatal(err)
		}
		err := FramingProblem(ctx)
		switch {
		case !upgraded && !IsConflict(err):
			t.Errorf("a head with both framings: problem %v, want a conflict", err)
		case upgraded && err != nil:
			t.Errorf("after Upgraded: problem %v, want none", err)
		case upgraded && c.(*framingConn).scan != nil:
			t.Error("after Upgraded the scanner is kept")
		}
		_ = c.Close()
	}
}

// upgradable is the interface the relay looks for (proxy.Upgraded).
type upgradable interface{ Upgraded() }
