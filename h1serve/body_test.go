package h1serve

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestBodyReadAfterHandlerReturns: a goroutine the handler leaves reading
// its request body gets an error once the handler has returned, never the
// bytes of the next request on the connection, and that request is
// answered (or the connection closes, saying so).
func TestBodyReadAfterHandlerReturns(t *testing.T) {
	var (
		mu       sync.Mutex
		got      []byte
		lastErr  error
		firstIn  = make(chan struct{})
		returned = make(chan struct{})
		leftover = make(chan struct{})
	)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/leave" {
			_, _ = io.WriteString(w, "next:"+r.URL.Path)
			return
		}
		go func() {
			defer close(leftover)
			buf := make([]byte, 64)
			for i := 0; ; i++ {
				n, err := r.Body.Read(buf)
				mu.Lock()
				got = append(got, buf[:n]...)
				lastErr = err
				mu.Unlock()
				if i == 0 {
					close(firstIn)
				}
				if err != nil {
					return
				}
			}
		}()
		<-firstIn // the goroutine now waits for the rest of the body
		_, _ = io.WriteString(w, "left")
		close(returned)
	})
	_, addr := startFast(t, h)
	c := dialRaw(t, addr)
	if _, err := io.WriteString(c, "POST /leave HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n0123456789"); err != nil {
		t.Fatal(err)
	}
	<-returned
	// The answer is written once the handler has returned: read it all
	// before the rest of the body and a second request are sent.
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("first answer: %v", err)
	}
	b, _ := io.ReadAll(res.Body)
	if string(b) != "left" {
		t.Fatalf("first answer %q", b)
	}
	rest := strings.Repeat("x", 90)
	next := "GET /second HTTP/1.1\r\nHost: t\r\n\r\n"
	_, _ = io.WriteString(c, rest+next)
	if !res.Close {
		res2, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("second answer: %v", err)
		}
		b2, _ := io.ReadAll(res2.Body)
		if string(b2) != "next:/second" {
			t.Fatalf("second answer %q", b2)
		}
	}
	select {
	case <-leftover:
	case <-time.After(10 * time.Second):
		t.Fatal("the body read left behind never ended")
	}
	mu.Lock()
	defer mu.Unlock()
	if bytes.Contains(got, []byte("GET")) {
		t.Fatalf("a read after the handler returned got the next request's bytes: %q", got)
	}
	if lastErr == nil || errors.Is(lastErr, io.EOF) && len(got) != 100 {
		t.Fatalf("the body's last read: %v after %d bytes", lastErr, len(got))
	}
}
