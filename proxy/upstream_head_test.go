package proxy

import (
	"bufio"
	"bytes"
	"io"
	"maps"
	"net/http"
	"slices"
	"testing"
)

// plainResponses are responses, plain and not, that readPlainResponse and
// http.ReadResponse both read.
var plainResponses = []string{
	"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello",
	"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 404\r\nContent-Length: 2\r\n\r\nno",
	"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 3\r\nset-cookie: a=1\r\nSet-Cookie: b=2\r\nRetry-After: 1\r\n\r\nbye",
	"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc",
	"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: keep-alive\r\nPragma: no-cache\r\n\r\nabc",
	"HTTP/1.1 200 Fine  with spaces \r\nContent-Length: 1\r\nX-Odd:  padded\t\r\nX-Empty:\r\n\r\nz",
	"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nTrailer: X-T\r\n\r\nbody",
	// short body: both report the cut
	"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
	// not plain: http.ReadResponse reads them
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
	"HTTP/1.1 200 OK\r\n\r\nclose-delimited",
	"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 204 No Content\r\n\r\n",
	"HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n",
	"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nContent-Length: -2\r\n\r\nok",
	"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
	"HTTP/1.1 2000 OK\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1  200 OK\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n folded\r\n\r\nok",
}

func TestPlainResponseMatchesNetHTTP(t *testing.T) {
	plain := 0
	for _, r := range plainResponses {
		if checkPlainResponse(t, []byte(r), "GET") {
			plain++
		}
	}
	if plain != 9 {
		t.Errorf("%d responses read as plain, want 9", plain)
	}
	// HEAD is never read as plain: its length is not its body's.
	if checkPlainResponse(t, []byte(plainResponses[0]), http.MethodHead) {
		t.Error("a response to HEAD was read as plain")
	}
}

func FuzzPlainResponseMatchesNetHTTP(f *testing.F) {
	for _, r := range plainResponses {
		f.Add([]byte(r))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkPlainResponse(t, b, "GET") })
}

// checkPlainResponse reads b both ways and compares; it reports whether
// readPlainResponse took it.
func checkPlainResponse(t *testing.T, b []byte, method string) bool {
	t.Helper()
	req := &http.Request{Method: method}
	got, handled, gerr := readPlainResponse(bufio.NewReader(bytes.NewReader(b)), req)
	if !handled {
		return false
	}
	want, werr := http.ReadResponse(bufio.NewReader(bytes.NewReader(b)), req)
	if (gerr == nil) != (werr == nil) {
		t.Fatalf("%q: error %v, net/http %v", b, gerr, werr)
	}
	if gerr != nil {
		return true
	}
	if got.Status != want.Status || got.StatusCode != want.StatusCode || got.Proto != want.Proto ||
		got.ContentLength != want.ContentLength || got.Close != want.Close || len(want.TransferEncoding) != 0 ||
		!maps.EqualFunc(got.Header, want.Header, slices.Equal) {
		t.Fatalf("%q:\n got %q %d %s len=%d close=%v %v\nwant %q %d %s len=%d close=%v %v te=%v", b,
			got.Status, got.StatusCode, got.Proto, got.ContentLength, got.Close, got.Header,
			want.Status, want.StatusCode, want.Proto, want.ContentLength, want.Close, want.Header, want.TransferEncoding)
	}
	gb, gberr := io.ReadAll(got.Body)
	wb, wberr := io.ReadAll(want.Body)
	if !bytes.Equal(gb, wb) || (gberr == nil) != (wberr == nil) {
		t.Fatalf("%q: body %q (%v), net/http %q (%v)", b, gb, gberr, wb, wberr)
	}
	return true
}
