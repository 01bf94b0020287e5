package h1client

import (
	"bufio"
	"net/http"
	"net/textproto"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// writeRequest writes req and flushes it. A request without a body takes
// writeHead, which writes what req.Write would, without sorting the
// header names (HTTP gives no meaning to the order of different fields)
// and without req.Write's general-purpose checks that the request gets
// here already met; anything unusual goes through req.Write.
func writeRequest(req *http.Request, bw *bufio.Writer) error {
	if HasBody(req) || !writeHead(req, bw) {
		if err := req.Write(bw); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// reqSkipHeader are the fields writeHead writes itself, or never sends.
var reqSkipHeader = map[string]bool{"Host": true, "User-Agent": true, "Content-Length": true,
	"Transfer-Encoding": true, "Trailer": true}

// writeHead writes the head of req, which has no body, to bw, and reports
// whether it did; false (nothing written) leaves the request to
// req.Write: a host, target or field that needs checking or cleaning, a
// transfer encoding or trailers without a body.
func writeHead(req *http.Request, bw *bufio.Writer) bool {
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	if len(req.TransferEncoding) > 0 || len(req.Trailer) > 0 || req.Method == "" || req.Method == http.MethodConnect ||
		strings.IndexByte(host, '%') >= 0 || !httpguts.ValidHostHeader(host) {
		return false
	}
	uri := req.URL.RequestURI()
	if !PlainText(uri) || !PlainText(req.Method) {
		return false
	}
	if !PlainFields(req.Header) {
		return false
	}
	_, _ = bw.WriteString(req.Method)
	_ = bw.WriteByte(' ')
	_, _ = bw.WriteString(uri)
	_, _ = bw.WriteString(" HTTP/1.1\r\nHost: ")
	_, _ = bw.WriteString(host)
	_, _ = bw.WriteString("\r\n")
	if ua, ok := req.Header["User-Agent"]; !ok {
		_, _ = bw.WriteString("User-Agent: Go-http-client/1.1\r\n")
	} else if len(ua) > 0 && ua[0] != "" {
		WriteField(bw, "User-Agent", textproto.TrimString(ua[0]))
	}
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch: // many servers expect a length for these
		_, _ = bw.WriteString("Content-Length: 0\r\n")
	}
	if req.Close && !HeaderHasToken(req.Header, "Connection", "close") {
		_, _ = bw.WriteString("Connection: close\r\n")
	}
	for k, vs := range req.Header {
		if reqSkipHeader[k] {
			continue
		}
		for _, v := range vs {
			WriteField(bw, k, textproto.TrimString(v))
		}
	}
	_, _ = bw.WriteString("\r\n")
	return true
}

func WriteField(bw *bufio.Writer, k, v string) {
	_, _ = bw.WriteString(k)
	_, _ = bw.WriteString(": ")
	_, _ = bw.WriteString(v)
	_, _ = bw.WriteString("\r\n")
}

// PlainFields reports whether every field of h has a valid name and a
// value that can go out as it is (PlainText).
func PlainFields(h http.Header) bool {
	for k, vs := range h {
		if !httpguts.ValidHeaderFieldName(k) {
			return false
		}
		for _, v := range vs {
			if !PlainText(v) {
				return false
			}
		}
	}
	return true
}

// PlainText reports whether s has no control byte but tab (so no CR, LF
// or NUL): it can go on a request line or in a field value as it is.
func PlainText(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// HeaderHasToken reports whether a value of h's field name lists token.
func HeaderHasToken(h http.Header, name, token string) bool {
	for _, v := range h[name] {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}
