package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wakegate/wakegate/forward"
)

// watchedBody counts the reads of a request body that start or end after
// its handler returned.
type watchedBody struct {
	io.ReadCloser
	returned *atomic.Bool
	late     *atomic.Int64
}

func (b *watchedBody) Read(p []byte) (int, error) {
	if b.returned.Load() {
		b.late.Add(1)
	}
	n, err := b.ReadCloser.Read(p)
	if b.returned.Load() {
		b.late.Add(1)
	}
	return n, err
}

// TestServeOutlivesNoBodyRead: an upstream answers 401 before it reads
// a POST's body, and then reads it (keeping the connection), or closes;
// the client sends its body slowly. Serve does not return while its
// exchange still reads the body: no read of it starts or ends after the
// handler, on both paths (direct and ReverseProxy).
func TestServeOutlivesNoBodyRead(t *testing.T) {
	for _, mode := range []string{"drain", "close"} {
		up := newRawUpstream(t, func(c net.Conn, br *bufio.Reader, _ int64) {
			for {
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				_, _ = io.WriteString(c, "HTTP/1.1 401 Unauthorized\r\nContent-Length: 2\r\n\r\nno")
				if mode == "close" {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
			}
		})
		for _, direct := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/direct=%v", mode, direct), func(t *testing.T) {
				p := New(testOptions())
				p.noDirect = !direct
				t.Cleanup(p.Close)
				var late atomic.Int64
				s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					returned := &atomic.Bool{}
					r.Body = &watchedBody{ReadCloser: r.Body, returned: returned, late: &late}
					p.Serve(w, r, &forward.Route{Kind: "app", Name: "a", Upstream: up.url(t)})
					returned.Store(true)
				}))
				t.Cleanup(s.Close)
				for range 3 {
					c, err := net.Dial("tcp", s.Listener.Addr().String())
					if err != nil {
						t.Fatal(err)
					}
					_ = c.SetDeadline(time.Now().Add(10 * time.Second))
					sent := make(chan struct{})
					go func() {
						// The body comes slowly, answered or not.
						defer close(sent)
						_, _ = fmt.Fprintf(c, "POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n")
						for range 100 {
							if _, err := io.WriteString(c, strings.Repeat("b", 1000)); err != nil {
								return
							}
							time.Sleep(5 * time.Millisecond)
						}
					}()
					res, err := http.ReadResponse(bufio.NewReader(c), nil)
					if err != nil {
						t.Fatalf("no answer: %v", err)
					}
					if res.StatusCode != http.StatusUnauthorized {
						t.Fatalf("status %d, want 401", res.StatusCode)
					}
					<-sent
					time.Sleep(50 * time.Millisecond)
					_ = c.Close()
				}
				if n := late.Load(); n > 0 {
					t.Fatalf("%d reads of the request body after its handler returned", n)
				}
			})
		}
	}
}

// url is the upstream's base URL.
func (u *rawUpstream) url(t *testing.T) *url.URL {
	t.Helper()
	v, err := url.Parse(u.base())
	if err != nil {
		t.Fatal(err)
	}
	return v
}
