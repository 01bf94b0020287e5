package h1serve

import (
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/wakegate/wakegate/internal/h1head"
)

// A request head is taken only when it is plain: the request line is
// "METHOD /origin-form-target HTTP/1.1", every line ends in CRLF, no field
// is folded, every name is a token and every value free of control bytes,
// Host comes exactly once, Content-Length at most once and in digits, and
// none of Transfer-Encoding, Expect or Upgrade is present. Anything else
// goes to net/http with the bytes unread, and net/http decides: the heads
// taken here are a subset of the ones net/http takes, and parse to the same
// request (TestHeadMatchesNetHTTP).

// headEnd measures the head at the start of b (h1head.End).
func headEnd(b []byte) int { return h1head.End(b) }

// parsedHead is what parseHead makes of a plain head.
type parsedHead struct {
	method, target string
	url            *url.URL
	header         http.Header
	host           string
	contentLength  int64
	close          bool // Connection: close
}

// parseHead parses the head b (as headEnd measured it). ok false means the
// head is not plain and goes to net/http.
func parseHead(b []byte) (h parsedHead, ok bool) {
	s := string(b) // one allocation; names and values are slices of it
	line, rest, _ := strings.Cut(s, "\r\n")
	m, rest1, ok1 := strings.Cut(line, " ")
	target, proto, ok2 := strings.Cut(rest1, " ")
	if !ok1 || !ok2 || proto != "HTTP/1.1" || !h1head.ValidToken(m) || m == "CONNECT" ||
		target == "" || target[0] != '/' {
		return h, false
	}
	for i := 0; i < len(target); i++ {
		if c := target[i]; c <= ' ' || c == 0x7f {
			return h, false
		}
	}
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return h, false
	}
	h.method, h.target, h.url = m, target, u
	hosts, cls := 0, 0
	hdr, ok := h1head.Fields(rest, func(key, v string) (keep, ok bool) {
		switch key {
		case "Host":
			hosts++
			h.host = v
			// net/http keeps Host out of the map
			return false, hosts == 1 && httpguts.ValidHostHeader(v)
		case "Content-Length":
			cls++
			h.contentLength, ok = h1head.Length(v)
			return true, ok && cls == 1
		case "Transfer-Encoding", "Expect", "Upgrade":
			return false, false
		case "Connection":
			h.close = h.close || h1head.HasClose(v)
		}
		return true, true
	})
	if !ok || hosts != 1 {
		return h, false
	}
	h.header = hdr
	return h, true
}
