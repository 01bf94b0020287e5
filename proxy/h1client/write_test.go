package h1client

import (
	"bufio"
	"bytes"
	"net/http"
	"net/url"
	"reflect"
	"testing"
)

// TestWriteHeadMatchesRequestWrite writes requests without a body with
// writeHead and with req.Write: an upstream parses the same request from
// both. Requests that need checking or cleaning are left to req.Write.
func TestWriteHeadMatchesRequestWrite(t *testing.T) {
	mk := func(method, target string, h http.Header, edit func(*http.Request)) *http.Request {
		u, err := url.Parse(target)
		if err != nil {
			t.Fatal(err)
		}
		req := &http.Request{Method: method, URL: u, Host: u.Host, Header: h}
		if edit != nil {
			edit(req)
		}
		return req
	}
	cases := []struct {
		name string
		req  *http.Request
		own  bool // writeHead writes it
	}{
		{"GET", mk("GET", "http://up:8080/a/b?x=1&y=%20", http.Header{"Accept": {"*/*"}, "X-Many": {"1", "2"}}, nil), true},
		{"HEAD, empty user agent", mk("HEAD", "http://up/", http.Header{"User-Agent": {""}}, nil), true},
		{"POST without body", mk("POST", "http://up/p", http.Header{"User-Agent": {"ua/1"}}, nil), true},
		{"DELETE", mk("DELETE", "http://up/d", http.Header{}, nil), true},
		{"escaped path", mk("GET", "http://up/a%2Fb/%C3%A9", http.Header{}, nil), true},
		{"Connection: close", mk("GET", "http://up/", http.Header{"X-A": {" padded "}}, func(r *http.Request) { r.Close = true }), true},
		{"host header differs", mk("GET", "http://10.0.0.1:80/", http.Header{}, func(r *http.Request) { r.Host = "name.example" }), true},
		{"a field value with a line break", mk("GET", "http://up/", http.Header{"X-A": {"a\r\nX-B: b"}}, nil), false},
		{"a zone in the host", mk("GET", "http://[fe80::1%25eth0]:80/", http.Header{}, nil), false},
		{"trailers without a body", mk("GET", "http://up/", http.Header{}, func(r *http.Request) { r.Trailer = http.Header{"X-T": nil} }), false},
		{"a bad field name", mk("GET", "http://up/", http.Header{"X A": {"1"}}, nil), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var own, std bytes.Buffer
			bw := bufio.NewWriter(&own)
			if got := writeHead(tc.req, bw); got != tc.own {
				t.Fatalf("writeHead wrote it: %v, want %v", got, tc.own)
			}
			if !tc.own {
				if bw.Buffered() != 0 {
					t.Fatal("writeHead wrote bytes of a request it left to req.Write")
				}
				return
			}
			_ = bw.Flush()
			if err := tc.req.Write(&std); err != nil {
				t.Fatal(err)
			}
			a, b := parseReq(t, own.Bytes()), parseReq(t, std.Bytes())
			if a.Method != b.Method || a.RequestURI != b.RequestURI || a.Host != b.Host || a.Close != b.Close ||
				a.ContentLength != b.ContentLength || !reflect.DeepEqual(a.Header, b.Header) {
				t.Errorf("writeHead:\n%s\nreq.Write:\n%s", own.Bytes(), std.Bytes())
			}
		})
	}
}

func parseReq(t *testing.T, raw []byte) *http.Request {
	t.Helper()
	req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
	if err != nil {
		t.Fatalf("%v in\n%s", err, raw)
	}
	return req
}
