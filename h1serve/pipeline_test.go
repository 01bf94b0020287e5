package h1serve

import (
	"bufio"
	"io"
	"log"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestPipelinedWhileTheHandlerRuns: a request the client sends before
// the previous answer came back, while the handler runs, is answered as
// soon as that answer is out, not after the idle timeout. Its bytes are
// in the socket before the answer's write, so a wait for the next
// request armed with that write would not wake for them.
func TestPipelinedWhileTheHandlerRuns(t *testing.T) {
	sent := make(chan struct{}, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/first" {
			<-sent
			time.Sleep(20 * time.Millisecond) // the bytes reach the socket
		}
		_, _ = io.WriteString(w, r.URL.Path)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Handler: h, ReadHeaderTimeout: time.Minute, IdleTimeout: time.Minute, ErrorLog: log.New(io.Discard, "", 0)}
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(ln) }()
	t.Cleanup(func() { _ = s.Close(); <-done })

	c := dialRaw(t, ln.Addr().String())
	br := bufio.NewReader(c)
	ask := func(path string) {
		t.Helper()
		if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: t\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	read := func(want string) {
		t.Helper()
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer to %s: %v", want, err)
		}
		if b, _ := io.ReadAll(res.Body); string(b) != want {
			t.Fatalf("answer %q, want %q", b, want)
		}
	}
	for range 3 { // the connection's first request, and later ones
		ask("/first")
		// The handler holds /first until the next request is out.
		time.Sleep(20 * time.Millisecond)
		ask("/second")
		sent <- struct{}{}
		read("/first")
		read("/second")
	}
}
