package h1head

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"strings"
	"testing"
)

// headLines is a body that looks like heads with conflicting framing (an
// upload of an HTTP capture or a mail file).
const headLines = "POST /x HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\nGET /y HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n"

var (
	get  = "GET /next HTTP/1.1\r\nHost: a\r\n\r\n"
	bad  = "POST /bad HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
	body = fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(headLines), headLines)
)

// framingCases are connection streams with how many request-lines a scan
// sees and the error it ends with.
var framingCases = []struct {
	name  string
	in    string
	heads int64
	err   error // nil, ErrConflict, or errLost for any reason to stop
}{
	{"get", get, 1, nil},
	{"pipelined gets", get + get + get, 3, nil},
	{"conflict", bad, 1, ErrConflict},
	{"conflict, odd case", "POST / HTTP/1.1\r\ncOnTeNt-LeNgTh: 5\r\ntRaNsFeR-eNcOdInG: chunked\r\n\r\n", 1, ErrConflict},
	{"conflict, HTTP/1.0", "POST / HTTP/1.0\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 1, ErrConflict},
	{"conflict, bare LF", "POST / HTTP/1.1\nContent-Length: 5\nTransfer-Encoding: chunked\n\n", 1, ErrConflict},
	{"length body with head lines", fmt.Sprintf("POST /u HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n%s", len(headLines), headLines) + get, 2, nil},
	{"chunked body with head lines", "POST /u HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" + body + get, 2, nil},
	{"chunked body, then conflict", "POST /u HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" + body + bad, 2, ErrConflict},
	{"length body, then conflict", fmt.Sprintf("POST /u HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n%s", len(headLines), headLines) + bad, 2, ErrConflict},
	{"chunks with extensions and trailers",
		"POST /u HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n" +
			"3;name=val\r\nabc\r\n0A \t\r\n0123456789\r\n0\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n" + get, 2, nil},
	{"extra CRLF after a body", "POST /u HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhi\r\n" + get, 2, nil},
	{"empty lines first", "\r\n\n\r\n" + get, 1, nil},
	{"HTTP/1.0 coding ignored", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n" + get, 2, nil},
	{"duplicate equal lengths", "POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nhi" + get, 2, nil},
	{"zero length", "POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n" + get, 2, nil},
	{"folded field that does not matter", "GET / HTTP/1.1\r\nX-A: 1\r\n 2\r\n\r\n" + get, 2, nil},
	{"long field", "GET / HTTP/1.1\r\nX-" + strings.Repeat("a", 100) + ": " + strings.Repeat("b", 200) + "\r\n\r\n" + get, 2, nil},
	// Framing that cannot be followed ends the scan (net/http refuses each).
	{"differing lengths", "POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nhi", 1, errLost},
	{"bad length", "POST / HTTP/1.1\r\nContent-Length: +2\r\n\r\nhi", 1, errLost},
	{"gzip coding", "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 1, errLost},
	{"two codings", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 1, errLost},
	{"folded length", "POST / HTTP/1.1\r\nContent-Length:\r\n 2\r\n\r\nhi", 1, errLost},
	{"chunk line with bare LF", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\nhi\r\n0\r\n\r\n", 1, errLost},
	{"chunk data without CRLF", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhix\r\n0\r\n\r\n", 1, errLost},
	{"chunk size with a space inside", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2 2\r\nhi\r\n0\r\n\r\n", 1, errLost},
	{"chunk size too long", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n00000000000000002\r\nhi\r\n0\r\n\r\n", 1, errLost},
}

// errLost stands for any reason the framing could not be followed.
var errLost = errors.New("lost")

func kind(err error) error {
	if err == nil || errors.Is(err, ErrConflict) {
		return err
	}
	return errLost
}

// TestFraming scans each stream whole, a byte at a time and split in two
// at every offset: the result is the same.
func TestFraming(t *testing.T) {
	for _, tc := range framingCases {
		t.Run(tc.name, func(t *testing.T) {
			check := func(how string, f *Framing) {
				t.Helper()
				if f.Heads() != tc.heads || kind(f.Err()) != tc.err {
					t.Fatalf("%s: %d heads, err %v; want %d, %v", how, f.Heads(), f.Err(), tc.heads, tc.err)
				}
			}
			var whole Framing
			whole.Scan([]byte(tc.in))
			check("whole", &whole)
			var bytewise Framing
			for i := range len(tc.in) {
				bytewise.Scan([]byte{tc.in[i]})
			}
			check("a byte at a time", &bytewise)
			for i := range len(tc.in) + 1 {
				var f Framing
				f.Scan([]byte(tc.in[:i]))
				f.Scan([]byte(tc.in[i:]))
				check(fmt.Sprintf("split at %d", i), &f)
			}
		})
	}
}

// TestFramingMatchesNetHTTP: on each stream, the scan finds the heads that
// net/http's server reads, at the same offsets, and stops at the first
// one with conflicting framing.
func TestFramingMatchesNetHTTP(t *testing.T) {
	for _, tc := range framingCases {
		t.Run(tc.name, func(t *testing.T) { checkFraming(t, []byte(tc.in)) })
	}
}

// FuzzFraming checks any stream against net/http (checkFraming) and
// against itself read in two pieces.
func FuzzFraming(f *testing.F) {
	for _, tc := range framingCases {
		f.Add([]byte(tc.in), uint16(len(tc.in)/2))
	}
	f.Fuzz(func(t *testing.T, b []byte, cut uint16) {
		whole := checkFraming(t, b)
		i := int(cut) % (len(b) + 1)
		var split Framing
		split.Scan(b[:i])
		split.Scan(b[i:])
		if split.Heads() != whole.Heads() || split.Err() != whole.Err() {
			t.Fatalf("%q split at %d: %d heads, %v; whole: %d, %v", b, i, split.Heads(), split.Err(), whole.Heads(), whole.Err())
		}
	})
}

// refHead is a request head as net/http's server reads it from a stream.
type refHead struct {
	start, end int  // offsets of its first byte and of the byte after it
	conflict   bool // it carries both Content-Length and Transfer-Encoding
}

// netHTTPHeads reads b as net/http's server reads a connection: leading
// CR and LF after a POST skipped (up to 4), then a request and its body,
// until a request or a body fails.
func netHTTPHeads(b []byte) []refHead {
	r := bytes.NewReader(b)
	br := bufio.NewReaderSize(r, 4096)
	pos := func() int { return len(b) - r.Len() - br.Buffered() }
	var heads []refHead
	last := ""
	for {
		if last == http.MethodPost {
			peek, _ := br.Peek(4)
			k := 0
			for k < len(peek) && (peek[k] == '\r' || peek[k] == '\n') {
				k++
			}
			_, _ = br.Discard(k)
		}
		start := pos()
		req, err := http.ReadRequest(br)
		if err != nil {
			return heads
		}
		h := refHead{start: start, end: pos()}
		tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(b[h.start:h.end])))
		if _, err := tp.ReadLine(); err == nil {
			if hdr, err := tp.ReadMIMEHeader(); err == nil {
				_, cl := hdr["Content-Length"]
				_, te := hdr["Transfer-Encoding"]
				h.conflict = cl && te
			}
		}
		heads = append(heads, h)
		if h.conflict {
			return heads
		}
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			return heads
		}
		last = req.Method
	}
}

// checkFraming scans b a byte at a time, noting where each head starts
// and where the scan stopped, and holds it to net/http: every head that
// net/http reads before the scan stopped starts where the scan saw one
// start, and a head with conflicting framing stops the scan at its end
// with ErrConflict. The scan may stop earlier than net/http fails (it
// follows less than net/http takes), never later. It returns the scan.
func checkFraming(t *testing.T, b []byte) *Framing {
	t.Helper()
	var f Framing
	var starts []int
	stop := len(b) + 1
	for i := range b {
		n := f.Heads()
		f.Scan(b[i : i+1])
		if f.Heads() > n {
			starts = append(starts, i)
		}
		if f.Err() != nil {
			stop = i
			break
		}
	}
	for i, h := range netHTTPHeads(b) {
		if h.start >= stop {
			break
		}
		if i >= len(starts) || starts[i] != h.start {
			t.Fatalf("%q: net/http reads head %d at %d, the scan saw heads at %v (stopped at %d: %v)", b, i, h.start, starts, stop, f.Err())
		}
		if h.conflict {
			if !errors.Is(f.Err(), ErrConflict) && stop > h.end {
				t.Fatalf("%q: head %d carries both framings, the scan went on (%v)", b, i, f.Err())
			}
			break
		}
	}
	return &f
}

// FuzzReadBody: ReadBody never takes a byte past the body's end, and gives
// the body's bytes in order, ending in io.EOF or io.ErrUnexpectedEOF.
func FuzzReadBody(f *testing.F) {
	f.Add([]byte("hello, world"), int64(5), uint8(3))
	f.Add([]byte("hi"), int64(5), uint8(1))
	f.Add([]byte(""), int64(0), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, length int64, size uint8) {
		if length < 0 {
			length = -length
		}
		length %= 1 << 20
		br := bufio.NewReaderSize(bytes.NewReader(data), 16)
		p := make([]byte, int(size)+1)
		left := length
		var got []byte
		for range 1 << 21 {
			n, err := ReadBody(br, p, &left)
			got = append(got, p[:n]...)
			if int64(len(got)) > length {
				t.Fatalf("read %d bytes of a %d-byte body", len(got), length)
			}
			if err == nil {
				continue
			}
			want := io.EOF
			if int64(len(data)) < length {
				want = io.ErrUnexpectedEOF
			}
			if !errors.Is(err, want) {
				t.Fatalf("ended with %v, want %v", err, want)
			}
			break
		}
		if n := min(int64(len(data)), length); !bytes.Equal(got, data[:n]) {
			t.Fatalf("read %q, want %q", got, data[:n])
		}
	})
}
