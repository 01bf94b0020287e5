// Package h1head parses the plain HTTP/1.1 heads that wakegate reads on its
// own, on both sides of the proxy: requests on the public listener
// (h1serve) and responses from upstreams (proxy). Plain means CRLF line
// ends, no folded line, token names and values without control bytes;
// the callers send anything else to net/http, which decides.
package h1head

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// End returns the length of the head at the start of b (through the blank
// line), 0 when b does not hold a whole head yet, or -1 when what b holds
// is not a plain head (a bare LF, a blank first line).
func End(b []byte) int {
	off := 0
	for {
		i := bytes.IndexByte(b[off:], '\n')
		if i < 0 {
			return 0
		}
		if i == 0 || b[off+i-1] != '\r' {
			return -1 // a bare LF
		}
		if i == 1 { // "\r\n": the blank line
			if off == 0 {
				return -1 // a blank line first
			}
			return off + 2
		}
		off += i + 1
	}
}

// Fields parses the field lines of s, the part of a head after its first
// line and through the blank line, into a header with canonical keys.
// check sees each field first: keep false leaves it out of the map, ok
// false refuses the head. ok false: a field is not plain or check refused
// one.
func Fields(s string, check func(key, value string) (keep, ok bool)) (http.Header, bool) {
	n := strings.Count(s, "\r\n") - 1 // the blank line ends s
	if n < 0 {
		return nil, false
	}
	vals := make([]string, n) // one backing array for single values
	h := make(http.Header, n)
	for i := range n {
		var line string
		line, s, _ = strings.Cut(s, "\r\n")
		name, v, found := strings.Cut(line, ":")
		if !found || !ValidToken(name) {
			return nil, false // also a folded line, which starts with a space
		}
		v = trimOWS(v)
		if !ValidValue(v) {
			return nil, false
		}
		key := http.CanonicalHeaderKey(name)
		keep, ok := check(key, v)
		if !ok {
			return nil, false
		}
		if !keep {
			continue
		}
		vals[i] = v
		if old, dup := h[key]; dup {
			h[key] = append(old, v)
		} else {
			h[key] = vals[i : i+1 : i+1]
		}
	}
	// As net/http does for both: an HTTP/1.0 cache's Pragma: no-cache,
	// for HTTP/1.1 readers.
	if p := h["Pragma"]; len(p) > 0 && p[0] == "no-cache" {
		if _, cc := h["Cache-Control"]; !cc {
			h["Cache-Control"] = []string{"no-cache"}
		}
	}
	return h, true
}

// Length parses a Content-Length value: digits only, no sign, small
// enough for an int64.
func Length(v string) (int64, bool) {
	if v == "" || len(v) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// HasClose says whether a Connection value holds the close token.
func HasClose(v string) bool {
	return httpguts.HeaderValuesContainsToken([]string{v}, "close")
}

// trimOWS trims the optional white space (spaces and tabs) around a value.
func trimOWS(s string) string {
	for s != "" && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for s != "" && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// ValidToken says whether s is a non-empty RFC 9110 token.
func ValidToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !httpguts.IsTokenRune(rune(s[i])) {
			return false
		}
	}
	return true
}

// ValidValue says whether a field value holds no control byte but HTAB.
func ValidValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// ReadBody reads into p from br at most *left more bytes of a body of known
// length, and counts them off *left. The last bytes come with io.EOF; a
// body that ends early gives io.ErrUnexpectedEOF.
func ReadBody(br *bufio.Reader, p []byte, left *int64) (int, error) {
	if *left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > *left {
		p = p[:*left]
	}
	n, err := br.Read(p)
	*left -= int64(n)
	if *left == 0 {
		return n, io.EOF
	}
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}
