package gateway_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
)

// TestTricklingUploadsLeaveTheHomeFree opens twice as many uploads to a
// home as it has forwarding slots (cap 4), each sending a 100000-byte body
// at 300 bytes per second (above the 240 B/s floor, so none is cut): a
// plain GET to the same home beside them is answered 200 while they all
// still trickle, instead of waiting for a slot until 503.
func TestTricklingUploadsLeaveTheHomeFree(t *testing.T) {
	t.Parallel()
	const uploads, max = 8, 4
	u := newHeldUpstream(t)
	u.open() // the home answers at once
	gw := homeConnsGateway(t, u, max, "3s")

	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() {
		close(stop)
		wg.Wait()
	}()
	var mu sync.Mutex
	sent := 0
	for range uploads {
		c, err := net.Dial("tcp", gw.addr)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer c.Close()
			_, err := fmt.Fprintf(c, "POST /node/h/upload HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
			chunk := []byte(strings.Repeat("u", 30))
			// At most 20s of trickling: the test stops it well before.
			for i := 0; err == nil && i < 200; i++ {
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
				if _, err = c.Write(chunk); err == nil {
					mu.Lock()
					sent += len(chunk)
					mu.Unlock()
				}
			}
		})
	}
	// Every upload is at the gateway, its body being read ahead, before
	// the GET.
	testbin.Eventually(t, "every upload's session", func() bool { return gw.g.Sessions().Count("h") == uploads })

	client := &http.Client{Timeout: 15 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	start := time.Now()
	res, err := client.Get("http://" + gw.addr + "/node/h/whoami")
	if err != nil {
		t.Fatalf("GET beside %d trickling uploads: %v", uploads, err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET beside %d trickling uploads (cap %d) got %d after %s: %s; want 200",
			uploads, max, res.StatusCode, time.Since(start).Round(time.Millisecond), body)
	}
	mu.Lock()
	defer mu.Unlock()
	if sent >= uploads*100000 {
		t.Fatalf("the uploads were over (%d bytes sent) before the GET", sent)
	}
}

// TestSlowReadersLeaveTheHomeFree has twice as many clients as the home
// has slots (cap 2) ask for an 8MiB response and read it at 500 bytes per
// second, below a floor of 64KiB per second with a 1s grace: each is cut
// within seconds, so a GET to the same home, queued behind them for at
// most the wake timeout (10s), is answered 200 instead of 503. On plain
// HTTP the loop keeps the floor in time across the response; over TLS
// (the loop too) the response goes out in pieces with final deadlines.
func TestSlowReadersLeaveTheHomeFree(t *testing.T) {
	t.Parallel()
	for _, tlsOn := range []bool{false, true} {
		name := "plain"
		if tlsOn {
			name = "tls"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			slowReadersLeaveTheHomeFree(t, tlsOn)
		})
	}
}

func slowReadersLeaveTheHomeFree(t *testing.T, tlsOn bool) {
	const readers, max = 4, 2
	big := make([]byte, 8<<20)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	home := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/big") {
			w.Header().Set("Content-Length", fmt.Sprint(len(big)))
			_, _ = w.Write(big)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})}
	go func() { _ = home.Serve(ln) }()
	t.Cleanup(func() { _ = home.Close() })
	tlsConf := ""
	if tlsOn {
		tlsConf = "tls: {mode: internal, names: [fair.test], http_listen: \"\"}\n"
	}
	gw := admStart(t, tlsConf+fmt.Sprintf(`
server: {max_conns_per_client: 10000, min_response_rate: 64KiB, min_rate_grace: 1s}
wake:
  warm_ttl: 10m
  idle_timeout: 0s
  wake_timeout: 10s
  probe: {kind: http, path: /healthz}
proxy:
  max_conns_per_home: %d
homes:
  - id: h
    provider: static
    endpoint: "http://%s"
`, max, ln.Addr().String()), "")
	if _, err := gw.g.Engine().EnsureAwake(context.Background(), "h"); err != nil {
		t.Fatalf("wake: %v", err)
	}
	// dial opens a client connection with a small receive buffer.
	dial := func() (net.Conn, error) {
		d := net.Dialer{Control: smallReadBuffer}
		return d.Dial("tcp", gw.addr)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	base := "http://" + gw.addr
	if tlsOn {
		roots := internalRoots(t, &tlsGateway{e2eGateway: gw.e2eGateway})
		waitCert(t, gw.addr, "fair.test", roots)
		conf := &tls.Config{ServerName: "fair.test", RootCAs: roots, NextProtos: []string{"http/1.1"}}
		dial = func() (net.Conn, error) {
			d := net.Dialer{Control: smallReadBuffer}
			return tls.DialWithDialer(&d, "tcp", gw.addr, conf)
		}
		client.Transport = &http.Transport{TLSClientConfig: conf.Clone(),
			TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}
		base = "https://" + gw.addr
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() {
		close(stop)
		wg.Wait()
	}()
	for range readers {
		c, err := dial()
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer c.Close()
			if _, err := io.WriteString(c, "GET /node/h/big HTTP/1.1\r\nHost: fair.test\r\n\r\n"); err != nil {
				return
			}
			buf := make([]byte, 50)
			// 500 bytes per second, for at most a minute.
			for i := 0; i < 600; i++ {
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
				_ = c.SetReadDeadline(time.Now().Add(time.Second))
				if _, err := io.ReadFull(c, buf); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
					return // cut
				}
			}
		})
	}
	// Every reader's request is in the gateway, and those past the cap
	// wait for a slot.
	testbin.Eventually(t, "the readers in the gateway", func() bool {
		return gw.g.Sessions().Count("h") == readers &&
			admValue(gw.scrape(t), "wakegate_home_conn_waits_total", nil) == readers-max
	})

	t.Cleanup(client.CloseIdleConnections)
	start := time.Now()
	req, _ := http.NewRequest(http.MethodGet, base+"/node/h/whoami", nil)
	req.Host = "fair.test"
	res, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET beside %d slow readers: %v", readers, err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET beside %d slow readers (cap %d) got %d after %s: %s; want 200",
			readers, max, res.StatusCode, time.Since(start).Round(time.Millisecond), body)
	}
	t.Logf("answered after %s", time.Since(start).Round(time.Millisecond))
}

// smallReadBuffer gives a client socket a small receive buffer before it
// connects, so that little of a response waits in the kernels for a
// client that reads slowly.
func smallReadBuffer(_, _ string, rc syscall.RawConn) error {
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10)
	}); err != nil {
		return err
	}
	return serr
}
