//go:build linux

// Command loopbench is a plain-HTTP/1.1 forwarder that runs on one epoll
// loop of its own, outside the Go runtime's network poller: one locked OS
// thread, non-blocking sockets read and written with raw system calls, no
// goroutine per connection and no allocation per request. It exists to
// measure what a Go data plane of that shape costs per request on a given
// machine, beside nginx and wakegate, so that the warm path's figures can be
// told apart into the runtime's share and the gateway's own
// (docs/performance.md, "A loop outside the runtime's poller";
// scripts/loop-bench.sh runs the comparison).
//
// It forwards what nginx's benchmark configuration forwards: requests
// under -prefix, with the request line kept, the Connection field dropped
// and X-Forwarded-For and X-Forwarded-Proto added, over keep-alive
// connections to one backend that are reused across clients. Answers must
// carry a Content-Length; they are streamed back with back-pressure on the
// client. Anything else (a chunked request or answer, a head over 16 KiB, a
// path outside the prefix, an upgrade) closes the client's connection. It
// keeps no timeouts and checks nothing a public gateway must check: it is a
// yardstick, never a proxy to run.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:18086", "address to listen on (IPv4)")
	backend := flag.String("backend", "127.0.0.1:18080", "backend address (IPv4)")
	prefix := flag.String("prefix", "/apps/", "path prefix to forward")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	l, err := newLoop(*listen, *backend, *prefix)
	if err != nil {
		log.Fatalf("loopbench: %v", err)
	}
	fmt.Fprintf(os.Stderr, "loopbench: forwarding %s%s* to %s\n", l.Addr(), *prefix, *backend)
	if err := l.Run(ctx); err != nil {
		log.Fatalf("loopbench: %v", err)
	}
}
