package h1client

import (
	"bufio"
	"bytes"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
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
	"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: Keep-Alive, CLOSE\r\nkeep-alive: timeout=5\r\nx-wakegate-relay: s\r\n" +
		"Content-Type: text/event-stream\r\nUpgrade: h2c\r\nProxy-Authenticate: Basic\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: X-Hop\r\nX-Hop: 1\r\n\r\nok",
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
	plain, blocks := 0, 0
	for _, r := range plainResponses {
		if checkPlainResponse(t, []byte(r), "GET") {
			plain++
		}
		if checkBlockResponse(t, []byte(r)) {
			blocks++
		}
	}
	if plain != 11 || blocks != 10 {
		t.Errorf("%d responses read as plain, %d into a block; want 11 and 10 (a Connection naming a field goes to a map)", plain, blocks)
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
	f.Fuzz(func(t *testing.T, b []byte) {
		checkPlainResponse(t, b, "GET")
		checkBlockResponse(t, b)
	})
}

// blockStripped are the names the block responses strip.
var blockStripped = []string{"X-Wakegate-Relay", "X-Internal"}

// checkBlockResponse reads b into a head block and with http.ReadResponse
// and compares what the direct path would send: the block's fields
// against net/http's header once the hop-by-hop and stripped fields are
// removed from it (answer's map path), and the framing. It reports
// whether the block took b.
func checkBlockResponse(t *testing.T, b []byte) bool {
	t.Helper()
	req := &http.Request{Method: "GET"}
	blk := &HeadBlock{Stripped: blockStripped}
	got, handled, gerr := readPlainResponse(bufio.NewReader(bytes.NewReader(b)), req, blk)
	if !handled || gerr != nil {
		return false
	}
	want, werr := http.ReadResponse(bufio.NewReader(bytes.NewReader(b)), req)
	if werr != nil {
		t.Fatalf("%q: read into a block, net/http fails: %v", b, werr)
	}
	if got.Header != nil {
		t.Fatalf("%q: a block response has a header map %v", b, got.Header)
	}
	RemoveHopByHop(want.Header)
	for _, k := range blockStripped {
		delete(want.Header, k)
	}
	fields := http.Header{}
	for line := range strings.SplitSeq(strings.TrimSuffix(string(blk.Fields), "\r\n"), "\r\n") {
		if line != "" {
			k, v, _ := strings.Cut(line, ": ")
			fields[k] = append(fields[k], v)
		}
	}
	if got.StatusCode != want.StatusCode || got.Status != want.Status || got.ContentLength != want.ContentLength ||
		blk.Length != want.ContentLength || got.Close != want.Close || !maps.EqualFunc(fields, want.Header, slices.Equal) ||
		blk.EventStream != EventStream(want.Header.Get("Content-Type")) {
		t.Fatalf("%q:\n block %d len=%d/%d close=%v sse=%v %q\n want  %d len=%d close=%v %q", b,
			got.StatusCode, got.ContentLength, blk.Length, got.Close, blk.EventStream, fields,
			want.StatusCode, want.ContentLength, want.Close, want.Header)
	}
	gb, gberr := io.ReadAll(got.Body)
	wb, wberr := io.ReadAll(want.Body)
	if !bytes.Equal(gb, wb) || (gberr == nil) != (wberr == nil) {
		t.Fatalf("%q: body %q (%v), net/http %q (%v)", b, gb, gberr, wb, wberr)
	}
	return true
}

// checkPlainResponse reads b both ways and compares; it reports whether
// readPlainResponse took it.
func checkPlainResponse(t *testing.T, b []byte, method string) bool {
	t.Helper()
	req := &http.Request{Method: method}
	got, handled, gerr := readPlainResponse(bufio.NewReader(bytes.NewReader(b)), req, nil)
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
