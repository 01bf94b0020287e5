package gateway_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
)

// TestConnsPerClientCapped opens server.max_conns_per_client connections
// from one client: the next one is closed at once and counted in
// wakegate_conns_refused_total, the ones inside the cap still work, and a
// place freed by a close is taken again.
func TestConnsPerClientCapped(t *testing.T) {
	t.Parallel()
	a := admStart(t, admDemo, "server:\n  max_conns_per_client: 3\n")
	dial := func() net.Conn {
		c, err := net.Dial("tcp", a.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	healthz := func(c net.Conn) error {
		_ = c.SetDeadline(time.Now().Add(testbin.WaitLimit))
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return err
		}
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return err
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", res.StatusCode)
		}
		return nil
	}
	before := admValue(a.scrape(t), "wakegate_conns_refused_total", nil)
	held := []net.Conn{dial(), dial(), dial()}
	for i, c := range held {
		if err := healthz(c); err != nil {
			t.Fatalf("connection %d inside the cap: %v", i, err)
		}
	}
	if err := healthz(dial()); err == nil {
		t.Fatal("a connection past the cap was served")
	}
	if got := admValue(a.scrape(t), "wakegate_conns_refused_total", nil) - before; got != 1 {
		t.Errorf("wakegate_conns_refused_total moved by %v, want 1", got)
	}
	held[0].Close()
	testbin.Eventually(t, "a freed place taken again", func() bool { return healthz(dial()) == nil })
}

// TestSlowBodyEndsItsSession sends a request body to a home at one byte
// per 200ms against a floor of 100 bytes per second: it is cut with 408
// and the home's session ends with it (so the home can idle), while the
// client would still be sending.
func TestSlowBodyEndsItsSession(t *testing.T) {
	t.Parallel()
	gw := e2eStartInProcess(t, `
log: {access: false}
server:
  min_body_rate: 100
  min_rate_grace: 1s
wake:
  idle_timeout: 0s
homes:
  - id: demo
`)
	if res, body := e2eGet(t, e2eClient(t), "http://"+gw.addr+"/node/demo/whoami", nil); res.StatusCode != http.StatusOK {
		t.Fatalf("wake: %d %s", res.StatusCode, body)
	}
	c, err := net.Dial("tcp", gw.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(testbin.WaitLimit))
	if _, err := io.WriteString(c, "POST /node/demo/whoami HTTP/1.1\r\nHost: x\r\nContent-Length: 10000\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	testbin.Eventually(t, "the slow request counted as a session", func() bool { return gw.g.Sessions().Count("demo") == 1 })
	res := testbin.Trickle(c, 200*time.Millisecond)
	if res == nil || res.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("slow body: %v, want 408", res)
	}
	if n := gw.g.Sessions().Count("demo"); n != 0 {
		t.Errorf("sessions after the cut: %d, want 0", n)
	}
}

// TestSlowClientsLatency measures a normal client's p99 through the
// gateway to a real home, idle and then with 50 clients sending bodies at
// one byte per second (under the default floor and grace). It logs both
// and their ratio; speed is not asserted here.
func TestSlowClientsLatency(t *testing.T) {
	if testing.Short() {
		t.Skip("measurement")
	}
	gw := e2eStartInProcess(t, `
log: {access: false}
server:
  max_conns_per_client: 1000
wake:
  idle_timeout: 0s
homes:
  - id: demo
`)
	c := e2eClient(t)
	url := "http://" + gw.addr + "/node/demo/whoami"
	p99 := func() time.Duration {
		var d []time.Duration
		for range 300 {
			start := time.Now()
			res, _ := e2eGet(t, c, url, nil)
			if res.StatusCode != http.StatusOK {
				t.Fatalf("normal client: %d", res.StatusCode)
			}
			d = append(d, time.Since(start))
		}
		slices.Sort(d)
		return d[len(d)*99/100]
	}
	p99() // warm up: wake the home, fill the pools
	idle := p99()

	const slow = 50
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range slow {
		conn, err := net.Dial("tcp", gw.addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(conn, "POST /node/demo/whoami HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer conn.Close()
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					if _, err := conn.Write([]byte{'x'}); err != nil {
						return
					}
				}
			}
		})
	}
	testbin.Eventually(t, "the slow clients counted as sessions", func() bool { return gw.g.Sessions().Count("demo") >= slow })
	loaded := p99()
	close(stop)
	wg.Wait()
	t.Logf("normal client p99: idle %s, with %d slow-body clients %s (ratio %.2f)", idle, slow, loaded,
		float64(loaded)/float64(idle))
}

// TestConnsPerClientBehindTrustedProxy sends requests through a trusted
// proxy (loopback): its own connections are not capped, and the requests
// it forwards count for the client in X-Forwarded-For. With three slow
// requests of one client in flight, a fourth of that client gets 429
// too_many_connections, whether the proxy names it in X-Forwarded-For or
// in the client-IP header (the cap resolves clients as the rate limits
// do), while another client's request goes through; once the three are
// over, the client's requests go through again.
func TestConnsPerClientBehindTrustedProxy(t *testing.T) {
	t.Parallel()
	a := admStart(t, admDemo, "server:\n  max_conns_per_client: 3\n  trusted_proxies: [127.0.0.1]\n"+
		"access:\n  client_ip_header: Fly-Client-Ip\n")
	c := e2eClient(t)
	forwarded := func(client string) http.Header { return http.Header{"X-Forwarded-For": {client}} }
	if res, body := e2eGet(t, c, "http://"+a.addr+"/node/demo/whoami", nil); res.StatusCode != http.StatusOK {
		t.Fatalf("wake: %d %s", res.StatusCode, body)
	}
	before := admValue(a.scrape(t), "wakegate_conns_refused_total", nil)
	done := make(chan int, 3)
	for range 3 {
		go func() {
			req, _ := http.NewRequest(http.MethodGet, "http://"+a.addr+"/node/demo/slow?d=3s", nil)
			req.Header = forwarded("198.51.100.7, 127.0.0.1")
			res, err := (&http.Client{Timeout: testbin.WaitLimit}).Do(req)
			if err != nil {
				done <- 0
				return
			}
			res.Body.Close()
			done <- res.StatusCode
		}()
	}
	testbin.Eventually(t, "three slow requests in flight", func() bool { return a.g.Sessions().Count("demo") == 3 })
	res, body := e2eGet(t, c, "http://"+a.addr+"/node/demo/whoami", forwarded("198.51.100.7"))
	if res.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), "too_many_connections") {
		t.Errorf("fourth request of one client: %d %s; want 429 too_many_connections", res.StatusCode, body)
	}
	byHeader := http.Header{"Fly-Client-Ip": {"198.51.100.7"}, "X-Forwarded-For": {"198.51.100.9"}}
	if res, body := e2eGet(t, c, "http://"+a.addr+"/node/demo/whoami", byHeader); res.StatusCode != http.StatusTooManyRequests {
		t.Errorf("fourth request of one client named by the client-IP header: %d %s; want 429", res.StatusCode, body)
	}
	if res, body := e2eGet(t, c, "http://"+a.addr+"/node/demo/whoami", forwarded("198.51.100.8")); res.StatusCode != http.StatusOK {
		t.Errorf("another client: %d %s; want 200", res.StatusCode, body)
	}
	if got := admValue(a.scrape(t), "wakegate_conns_refused_total", nil) - before; got != 2 {
		t.Errorf("wakegate_conns_refused_total moved by %v, want 2", got)
	}
	for range 3 {
		if code := <-done; code != http.StatusOK {
			t.Errorf("slow request: %d, want 200", code)
		}
	}
	// Once they are over, the client's places are given back.
	testbin.Eventually(t, "the client's places given back", func() bool {
		res, _ := e2eGet(t, c, "http://"+a.addr+"/node/demo/whoami", forwarded("198.51.100.7"))
		return res.StatusCode == http.StatusOK
	})
}
