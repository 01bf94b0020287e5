// Command tlsbench measures a TLS server from the client side, for
// scripts/tls-bench.sh: full handshakes per second (no session reuse),
// resumed handshakes per second (session tickets), or HTTPS requests per
// second over keep-alive HTTP/1.1 connections. It prints one line:
// "<mode> <ops> <seconds> <ops/s> <errors> [resumed-fraction]".
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8443", "server address")
	name := flag.String("name", "bench.test", "server name (SNI and Host)")
	caFile := flag.String("ca", "", "PEM file of the certificate to trust")
	mode := flag.String("mode", "full", "full, resumed or https")
	dur := flag.Duration("d", 3*time.Second, "how long to measure")
	conns := flag.Int("c", 8, "concurrent workers")
	path := flag.String("path", "/", "request path (https mode)")
	curves := flag.String("curves", "", "key exchanges the client offers, comma-separated (x25519, p256, x25519mlkem768); empty: Go's default")
	flag.Parse()
	pem, err := os.ReadFile(*caFile)
	if err != nil {
		fail(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		fail(errors.New("no certificate in -ca"))
	}
	conf := &tls.Config{ServerName: *name, RootCAs: roots, NextProtos: []string{"http/1.1"}}
	if conf.CurvePreferences, err = parseCurves(*curves); err != nil {
		fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *dur)
	defer cancel()
	var ops, errs, resumed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range *conns {
		wg.Go(func() {
			var w func() error
			switch *mode {
			case "full":
				w = func() error { _, err := handshake(*addr, conf); return err }
			case "resumed":
				c := conf.Clone()
				c.ClientSessionCache = tls.NewLRUClientSessionCache(4)
				prime(*addr, c, *name)
				w = func() error {
					did, err := handshake(*addr, c)
					if did {
						resumed.Add(1)
					}
					return err
				}
			case "https":
				w = httpsWorker(*addr, *name, *path, conf)
			default:
				fail(fmt.Errorf("unknown mode %q", *mode))
			}
			for ctx.Err() == nil {
				if err := w(); err != nil {
					errs.Add(1)
					continue
				}
				ops.Add(1)
			}
		})
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	line := fmt.Sprintf("%s %d %.2f %.0f %d", *mode, ops.Load(), secs, float64(ops.Load())/secs, errs.Load())
	if *mode == "resumed" && ops.Load() > 0 {
		line += fmt.Sprintf(" %.3f", float64(resumed.Load())/float64(ops.Load()))
	}
	fmt.Println(line)
}

// handshake opens a connection, completes the handshake and closes it; it
// reports whether the session was resumed.
func handshake(addr string, conf *tls.Config) (bool, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, conf)
	if err != nil {
		return false, err
	}
	did := c.ConnectionState().DidResume
	return did, c.Close()
}

// prime makes one request on a connection so that the server's TLS 1.3
// session ticket, sent after the handshake, reaches conf's session cache.
func prime(addr string, conf *tls.Config, name string) {
	c, err := tls.Dial("tcp", addr, conf)
	if err != nil {
		fail(err)
	}
	defer func() { _ = c.Close() }()
	_, _ = fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", name)
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, _ = io.Copy(io.Discard, c)
}

// httpsWorker returns a function that sends one GET over a keep-alive
// connection of its own.
func httpsWorker(addr, name, path string, conf *tls.Config) func() error {
	d := &net.Dialer{Timeout: 5 * time.Second}
	tr := &http.Transport{
		TLSClientConfig:     conf,
		DialContext:         func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) },
		MaxIdleConnsPerHost: 1,
		TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	url := "https://" + name + path
	return func() error {
		res, err := client.Get(url)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", res.StatusCode)
		}
		return nil
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "tlsbench:", err)
	os.Exit(1)
}

// parseCurves reads the -curves list; an empty list leaves Go's default.
func parseCurves(list string) ([]tls.CurveID, error) {
	if list == "" {
		return nil, nil
	}
	var out []tls.CurveID
	for _, n := range strings.Split(list, ",") {
		switch strings.ToLower(strings.TrimSpace(n)) {
		case "x25519":
			out = append(out, tls.X25519)
		case "p256":
			out = append(out, tls.CurveP256)
		case "x25519mlkem768":
			out = append(out, tls.X25519MLKEM768)
		default:
			return nil, fmt.Errorf("-curves: unknown key exchange %q (x25519, p256, x25519mlkem768)", n)
		}
	}
	return out, nil
}
