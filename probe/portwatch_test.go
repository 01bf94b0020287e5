package probe

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A home that starts listening in the middle of a long pause is probed as
// soon as its port accepts, not when the pause ends: with pauses of an hour
// the probe can only pass through the port watch.
func TestProbePortWatchEndsPause(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // refused until the server below starts

	var hits atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
	})}
	t.Cleanup(func() { _ = srv.Close() })
	started, refused := make(chan struct{}), make(chan struct{})
	markRefused := sync.OnceFunc(func() { close(refused) })
	go func() {
		// Start listening only after the first attempt was refused.
		<-refused
		l, err := net.Listen("tcp", addr)
		if err != nil {
			close(started)
			return
		}
		close(started)
		_ = srv.Serve(l)
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := Run(ctx, Spec{Kind: HTTP, Endpoint: "http://" + addr, Path: "/",
		MinPause: time.Hour, MaxPause: time.Hour, OnAttempt: func(r Result) {
			if r.Attempts == 1 {
				markRefused()
			}
		}}, nil)
	markRefused() // a probe that made no refused attempt fails below
	<-started
	if err != nil {
		t.Fatalf("probe: %v (attempts %d)", err, res.Attempts)
	}
	if res.Attempts != 2 || hits.Load() != 1 {
		t.Fatalf("attempts = %d, server hits = %d; want 2 attempts (one refused, one passed) and 1 hit", res.Attempts, hits.Load())
	}
}

// With the port watch off, the same probe waits out its pause: bounded by
// ctx it fails after one refused attempt.
func TestProbePortWatchOff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	res, err := Run(ctx, Spec{Kind: HTTP, Endpoint: "http://" + addr,
		MinPause: time.Hour, MaxPause: time.Hour, PortWatch: -1}, nil)
	if err == nil || res.Attempts != 1 {
		t.Fatalf("err = %v, attempts = %d; want a failure after exactly 1 attempt", err, res.Attempts)
	}
}
