package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wakegate/wakegate/forward"
	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/proxy/h1client"
)

// hintsFlood is how many 103 Early Hints the flooding upstream sends in
// place of an answer: well past h1client.Max1xx.
const hintsFlood = 50

// newFloodUpstream answers the first request on each connection with 200
// and every later one with hintsFlood 103s and nothing more, then closes.
// It records each request's X-Request-Id.
func newFloodUpstream(t *testing.T) (*rawUpstream, func() []string) {
	var mu sync.Mutex
	var ids []string
	up := newRawUpstream(t, func(c net.Conn, br *bufio.Reader, _ int64) {
		for i := 0; ; i++ {
			req := readReq(br)
			if req == nil {
				return
			}
			mu.Lock()
			ids = append(ids, req.Header.Get("X-Request-Id"))
			mu.Unlock()
			if i == 0 {
				_, _ = io.WriteString(c, okResponse)
				continue
			}
			hint := "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"
			_, _ = io.WriteString(c, strings.Repeat(hint, hintsFlood))
			return
		}
	})
	return up, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), ids...)
	}
}

// once checks that every id in ids was received once.
func once(t *testing.T, ids []string) {
	t.Helper()
	seen := map[string]int{}
	for _, id := range ids {
		seen[id]++
		if seen[id] == 2 {
			t.Errorf("the upstream received request %q twice (received %q)", id, ids)
		}
	}
}

// TestForwarder1xxFloodIsNotSentAgain: a reused connection whose upstream
// answers with a flood of 1xx and then closes has answered: the request is
// not sent again on a fresh connection, and the caller sees at most
// h1client.Max1xx informational responses. net/http's Transport, the fallback,
// does not send it again either (it leaves counting 1xx to a caller that
// watches them, so only the forwarder's count is checked).
func TestForwarder1xxFloodIsNotSentAgain(t *testing.T) {
	for _, name := range []string{"forwarder", "net/http"} {
		t.Run(name, func(t *testing.T) {
			up, ids := newFloodUpstream(t)
			var rt http.RoundTripper
			var idle func(n int)
			if name == "forwarder" {
				f := newTestForwarder(t)
				rt, idle = f, func(n int) { waitIdle(t, f.Pool(), n) }
			} else {
				tr := &http.Transport{}
				t.Cleanup(tr.CloseIdleConnections)
				rt, idle = tr, func(int) {}
			}
			req := newReq(t, http.MethodGet, up.base()+"/", nil)
			req.Header.Set("X-Request-Id", "warm")
			res, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			idle(1)

			hints := 0
			trace := &httptrace.ClientTrace{Got1xxResponse: func(int, textproto.MIMEHeader) error {
				hints++
				return nil
			}}
			req = newReq(t, http.MethodGet, up.base()+"/", nil)
			req.Header.Set("X-Request-Id", "flooded")
			req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
			res, err = rt.RoundTrip(req)
			if err == nil {
				res.Body.Close()
				t.Fatalf("a response without a final status was taken: %d", res.StatusCode)
			}
			if name == "forwarder" && hints > h1client.Max1xx {
				t.Errorf("the caller got %d informational responses, want at most %d", hints, h1client.Max1xx)
			}
			once(t, ids())
			if n := up.conns.Load(); n != 1 {
				t.Errorf("the upstream accepted %d connections, want 1 (no second try)", n)
			}
		})
	}
}

// TestForwarder1xxShareTheHeaderBudget: the 1xx heads count against the
// same budget as the final head, so a few large ones cannot take more
// than one head may.
func TestForwarder1xxShareTheHeaderBudget(t *testing.T) {
	pad := strings.Repeat("a", h1client.MaxResponseHeaderBytes/3+1)
	up := newRawUpstream(t, func(c net.Conn, br *bufio.Reader, _ int64) {
		if readReq(br) == nil {
			return
		}
		for range 3 {
			if _, err := io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nX-Pad: "+pad+"\r\n\r\n"); err != nil {
				return
			}
		}
		_, _ = io.WriteString(c, okResponse)
	})
	f := newTestForwarder(t)
	code, _, err := get(t, f, up.base()+"/")
	if !errors.Is(err, h1client.ErrHeaderTooLarge) {
		t.Fatalf("three 1xx heads of a third of the budget each: %d, %v; want %v", code, err, h1client.ErrHeaderTooLarge)
	}
}

// TestProxy1xxFloodIsNotSentAgain: the same through the whole proxy, on
// the direct path and through ReverseProxy: the client gets a 502 after at
// most h1client.Max1xx 103s, and the upstream sees each request id once.
func TestProxy1xxFloodIsNotSentAgain(t *testing.T) {
	for _, direct := range []bool{true, false} {
		t.Run(fmt.Sprintf("direct=%v", direct), func(t *testing.T) {
			up, ids := newFloodUpstream(t)
			upURL, err := url.Parse(up.base())
			if err != nil {
				t.Fatal(err)
			}
			s, p := front(t, testOptions(), func() *forward.Route { return &forward.Route{Kind: "app", Name: "a", Upstream: upURL} })
			p.noDirect = !direct
			client := &http.Transport{}
			t.Cleanup(client.CloseIdleConnections)
			send := func(id string) (*http.Response, int) {
				hints := 0
				trace := &httptrace.ClientTrace{Got1xxResponse: func(int, textproto.MIMEHeader) error {
					hints++
					return nil
				}}
				req := newReq(t, http.MethodGet, s.URL+"/", nil)
				req.Header.Set("X-Request-Id", id)
				req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
				res, err := client.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				return res, hints
			}
			if res, _ := send("warm"); res.StatusCode != 200 {
				t.Fatalf("first request: %d", res.StatusCode)
			}
			waitIdle(t, p.conns, 1)
			res, hints := send("flooded")
			if res.StatusCode != http.StatusBadGateway {
				t.Errorf("flooded request: %d, want 502", res.StatusCode)
			}
			if hints > h1client.Max1xx {
				t.Errorf("the client got %d informational responses, want at most %d", hints, h1client.Max1xx)
			}
			once(t, ids())
		})
	}
}

// TestProxyNoRetryAfterPartialAnswer: an upstream that sends a 103 and
// then resets the connection has answered in part: the route's retry
// (a fresh wake) does not send the request again, on either path, nor
// for an upgrade, which net/http's Transport carries.
func TestProxyNoRetryAfterPartialAnswer(t *testing.T) {
	for _, how := range []string{"direct", "reverseproxy", "upgrade"} {
		direct := how == "direct"
		t.Run(how, func(t *testing.T) {
			var mu sync.Mutex
			var ids []string
			gotHint := make(chan struct{}, 1)
			up := newRawUpstream(t, func(c net.Conn, br *bufio.Reader, _ int64) {
				req := readReq(br)
				if req == nil {
					return
				}
				mu.Lock()
				ids = append(ids, req.Header.Get("X-Request-Id"))
				mu.Unlock()
				_, _ = io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n")
				// The reset comes once the client has the 103: sooner, it
				// could drop the 103 unread at the proxy.
				select {
				case <-gotHint:
				case <-time.After(testbin.WaitLimit):
				}
				_ = c.(*net.TCPConn).SetLinger(0)
			})
			upURL, err := url.Parse(up.base())
			if err != nil {
				t.Fatal(err)
			}
			var retries atomic.Int64
			s, p := front(t, testOptions(), func() *forward.Route {
				return &forward.Route{Kind: "home", Name: "h", HomeID: "h", Upstream: upURL,
					Retry: func(context.Context) (*url.URL, error) {
						retries.Add(1)
						return upURL, nil
					}}
			})
			p.noDirect = !direct
			req := newReq(t, http.MethodGet, s.URL+"/", nil)
			req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
				Got1xxResponse: func(int, textproto.MIMEHeader) error {
					select {
					case gotHint <- struct{}{}:
					default:
					}
					return nil
				},
			}))
			req.Header.Set("X-Request-Id", "partial")
			if how == "upgrade" {
				req.Header.Set("Connection", "Upgrade")
				req.Header.Set("Upgrade", "example")
			}
			res, _ := do(t, req)
			if res.StatusCode != http.StatusBadGateway {
				t.Errorf("status %d, want 502", res.StatusCode)
			}
			if n := retries.Load(); n != 0 {
				t.Errorf("the route retried %d times after a partial answer", n)
			}
			mu.Lock()
			defer mu.Unlock()
			once(t, ids)
		})
	}
}
