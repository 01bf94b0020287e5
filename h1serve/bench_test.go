package h1serve

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// BenchmarkKeepAlive sends 1 KiB GETs on one kept-alive connection to the
// loop here and to net/http, with a handler that answers with a
// Content-Length as a proxied response does. The client's share is the
// same in both.
func BenchmarkKeepAlive(b *testing.B) {
	body := strings.Repeat("x", 1024)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", "1024")
		_, _ = io.WriteString(w, body)
	})
	for _, srv := range []string{"h1serve", "net-http"} {
		b.Run(srv, func(b *testing.B) {
			var addr string
			if srv == "h1serve" {
				_, addr = startFast(b, h)
			} else {
				addr = startStd(b, h)
			}
			c, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			req := []byte("GET /apps/demo/small HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n")
			br := bufio.NewReader(c)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Write(req); err != nil {
					b.Fatal(err)
				}
				res, err := http.ReadResponse(br, nil)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(io.Discard, res.Body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
