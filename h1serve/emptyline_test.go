package h1serve

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestEmptyLinesBeforeRequest: empty lines before a request-line are
// ignored (RFC 9112 §2.2), as net/http does after a POST and nginx after
// any request: a client that ends a POST body with an extra CRLF gets its
// next request on the connection answered, by the loop itself. The empty
// lines may come with the body, with the next request or on their own.
func TestEmptyLinesBeforeRequest(t *testing.T) {
	post := "POST /post HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello"
	get := "GET /next HTTP/1.1\r\nHost: t\r\n\r\n"
	cases := []struct {
		name   string
		writes []string
	}{
		{"CRLF after a body, one write", []string{post + "\r\n" + get}},
		{"CRLF after a body, apart", []string{post, "\r\n", get}},
		{"CRLF before the next request", []string{post, "\r\n" + get}},
		{"two CRLFs", []string{post + "\r\n\r\n" + get}},
		{"CRLF after a GET", []string{get + "\r\n" + get}},
		{"CRLF first", []string{"\r\n" + get}},
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, _ = io.WriteString(w, r.URL.Path+" "+string(b))
	})
	s, addr := startFast(t, h)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := s.Stats()
			c := dialRaw(t, addr)
			br := bufio.NewReader(c)
			var wants []string
			for _, w := range tc.writes {
				if _, err := io.WriteString(c, w); err != nil {
					t.Fatal(err)
				}
				// Each request written so far is answered before the next
				// write, so that the empty lines arrive on their own.
				for n := strings.Count(w, " HTTP/1.1\r\n"); n > 0; n-- {
					wants = append(wants, "")
					res, err := http.ReadResponse(br, nil)
					if err != nil {
						t.Fatalf("response %d: %v", len(wants), err)
					}
					b, _ := io.ReadAll(res.Body)
					res.Body.Close()
					if res.StatusCode != 200 {
						t.Fatalf("response %d: %d %q", len(wants), res.StatusCode, b)
					}
				}
			}
			after := s.Stats()
			if got, want := after.Requests-before.Requests, int64(len(wants)); got != want || after.HandedOff != before.HandedOff {
				t.Errorf("the loop served %d requests and handed %d off, want %d and none", got, after.HandedOff-before.HandedOff, want)
			}
		})
	}
}
