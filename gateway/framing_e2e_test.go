package gateway

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// headLines is a body that looks like a head with conflicting framing: an
// upload of an HTTP capture or of a mail file.
const headLines = "POST /x HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\nhello\r\n"

// TestFramingLooksAtHeadsOnly: a body whose lines look like framing
// headers is served, chunked (with and without trailers) or with a
// Content-Length, on either HTTP/1.1 server, and the requests after it on
// the connection are served too; a request with conflicting framing after
// such a body is still refused, and the connection closed.
func TestFramingLooksAtHeadsOnly(t *testing.T) {
	chunked := fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(headLines), headLines)
	withTrailer := fmt.Sprintf("%x\r\n%s\r\n0\r\nX-Sum: 1\r\nContent-Length: 9\r\n\r\n", len(headLines), headLines)
	reqs := map[string]string{
		"chunked":               "POST /apps/a/up HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked,
		"chunked with trailers": "POST /apps/a/up HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n" + withTrailer,
		"length":                fmt.Sprintf("POST /apps/a/up HTTP/1.1\r\nHost: gw\r\nContent-Length: %d\r\n\r\n%s", len(headLines), headLines),
	}
	next := "GET /apps/a/next HTTP/1.1\r\nHost: gw\r\n\r\n"
	smuggle := "POST /apps/a/x HTTP/1.1\r\nHost: gw\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
	for _, server := range []string{"wakegate", "net/http"} {
		a := newHardUpstream(t, nil)
		addr := hardGateway(t, appsConfig("server:\n  http1_server: "+server+"\n", map[string]*hardUpstream{"a": a}))
		for name, req := range reqs {
			t.Run(server+"/"+name, func(t *testing.T) {
				for _, pipelined := range []bool{false, true} {
					c := hardDial(t, addr)
					if pipelined {
						c.send(t, req+next+next)
					}
					for i, want := range []string{fmt.Sprintf("ok %d", len(headLines)), "ok 0", "ok 0"} {
						if !pipelined {
							c.send(t, []string{req, next, next}[i])
						}
						res, body := c.response(t, http.MethodPost)
						if res.StatusCode != 200 || body != want {
							t.Fatalf("pipelined=%v, request %d: %d %q, want 200 %q", pipelined, i, res.StatusCode, body, want)
						}
					}
				}
				// The conflicting request comes once the one before it is
				// answered: a head read ahead with the request before it
				// condemns the connection, that request included.
				c := hardDial(t, addr)
				c.send(t, req)
				if res, body := c.response(t, http.MethodPost); res.StatusCode != 200 {
					t.Fatalf("the request before the conflicting one: %d %q", res.StatusCode, body)
				}
				c.send(t, smuggle)
				res, body := c.response(t, http.MethodPost)
				if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "bad_framing") {
					t.Fatalf("conflicting framing after a body: %d %q, want 400 bad_framing", res.StatusCode, body)
				}
				if !c.closed(t) {
					t.Fatal("the connection stayed open after conflicting framing")
				}
			})
		}
	}
}

// TestExtraCRLFAfterBody: a client that ends a POST body with an extra
// CRLF gets its next request on the connection served, on either HTTP/1.1
// server (RFC 9112 §2.2).
func TestExtraCRLFAfterBody(t *testing.T) {
	for _, server := range []string{"wakegate", "net/http"} {
		t.Run(server, func(t *testing.T) {
			a := newHardUpstream(t, nil)
			addr := hardGateway(t, appsConfig("server:\n  http1_server: "+server+"\n", map[string]*hardUpstream{"a": a}))
			c := hardDial(t, addr)
			c.send(t, "POST /apps/a/up HTTP/1.1\r\nHost: gw\r\nContent-Length: 5\r\n\r\nhello\r\n"+
				"GET /apps/a/next HTTP/1.1\r\nHost: gw\r\n\r\n")
			for i, want := range []string{"ok 5", "ok 0"} {
				res, body := c.response(t, http.MethodPost)
				if res.StatusCode != 200 || body != want {
					t.Fatalf("request %d: %d %q, want 200 %q", i, res.StatusCode, body, want)
				}
			}
		})
	}
}
