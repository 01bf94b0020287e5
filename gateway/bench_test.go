package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"
)

// e2eBenchGet fetches url b.N times over one keep-alive client and checks
// every answer is 200 with want bytes.
func e2eBenchGet(b *testing.B, url string, want int) {
	tr := &http.Transport{MaxIdleConnsPerHost: 4}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	b.ReportAllocs()
	b.SetBytes(int64(want))
	for b.Loop() {
		res, err := c.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK || n != int64(want) {
			b.Fatalf("GET %s: %d, %d bytes, %v", url, res.StatusCode, n, err)
		}
	}
}

// BenchmarkProxyWarm compares a 1 KiB GET straight to a backend with the
// same GET through the gateway's handler to an app whose upstream is that
// backend.
func BenchmarkProxyWarm(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 1024)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	}))
	defer backend.Close()
	gw := e2eStartInProcess(b, fmt.Sprintf("apps:\n  - slug: bench\n    upstream: %q\n    kind: api\n", backend.URL))
	front := httptest.NewServer(gw.g.Handler())
	defer front.Close()

	b.Run("direct", func(b *testing.B) { e2eBenchGet(b, backend.URL+"/apps/bench/x", len(body)) })
	b.Run("gateway", func(b *testing.B) { e2eBenchGet(b, front.URL+"/apps/bench/x", len(body)) })
}

// BenchmarkProxyWarmNode compares a 1 KiB GET straight to a woken exec home
// with the same GET through the gateway's handler at /node/{target}, with
// a warm verdict (warm_ttl is an hour, so no wake runs while measuring).
func BenchmarkProxyWarmNode(b *testing.B) {
	gw := e2eStartInProcess(b, `
wake:
  warm_ttl: 1h
  idle_timeout: 0s
homes:
  - id: demo
`)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := gw.g.Engine().EnsureAwake(ctx, "demo")
	if err != nil {
		b.Fatalf("wake: %v", err)
	}
	if !gw.g.Engine().Warm("demo") {
		b.Fatal("no warm verdict after a wake")
	}
	front := httptest.NewServer(gw.g.Handler())
	defer front.Close()

	const path = "/node/demo/bytes/1024"
	b.Run("direct", func(b *testing.B) { e2eBenchGet(b, a.Endpoint.String()+path, 1024) })
	b.Run("gateway", func(b *testing.B) { e2eBenchGet(b, front.URL+path, 1024) })
}
