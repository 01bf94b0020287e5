package proxy

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/wakegate/wakegate/forward"
)

// wsHomeEnv makes the test binary a WebSocket echo home on a loopback
// port it prints, until its stdin closes: the idle-memory benchmark runs
// its home in another process so that the home's memory is not counted.
const wsHomeEnv = "WAKEGATE_PROXY_TEST_WSHOME"

func TestMain(m *testing.M) {
	if os.Getenv(wsHomeEnv) != "" {
		serveWSHome()
		return
	}
	os.Exit(m.Run())
}

func serveWSHome() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	up := websocket.Upgrader{ReadBufferSize: 256, WriteBufferSize: 256}
	go func() {
		_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, err := up.Upgrade(w, r, nil)
			if err != nil {
				return
			}
			defer c.Close()
			for {
				mt, msg, err := c.ReadMessage()
				if err != nil || c.WriteMessage(mt, msg) != nil {
					return
				}
			}
		}))
	}()
	fmt.Println(ln.Addr().String())
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// startWSHome starts the echo home in a child process and returns its
// address.
func startWSHome(b *testing.B) string {
	b.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), wsHomeEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("home: %v", err)
	}
	return strings.TrimSpace(addr)
}

// openIdleWS opens a WebSocket through addr on a raw connection, has it
// echo one message and leaves it idle.
func openIdleWS(dial func(string) (net.Conn, error), addr string) (net.Conn, error) {
	c, err := dial(addr)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	defer func() { _ = c.SetDeadline(time.Time{}) }()
	_, err = io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: "+addr+"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
	if err == nil {
		_, err = c.Write(clientFrame("prime"))
	}
	// The 101 and the echo: read until the echo's payload is seen.
	var buf [512]byte
	got := 0
	for err == nil && !bytes.HasSuffix(buf[:got], []byte("prime")) && got < len(buf) {
		var n int
		n, err = c.Read(buf[got:])
		got += n
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// BenchmarkRelayIdleMemory opens 2,000 WebSockets through a proxy whose
// relays detach (as the gateway's do) to an echo home in another
// process, primes each with one echo and reports the heap and stacks the
// process holds per idle WebSocket after a collection (KiB/conn, the
// client's end of each connection included), the resident memory growth
// (RSS-KiB/conn), and what the process allocated per WebSocket opened
// (alloc-KiB/conn: the handshake's garbage, which a burst of handshakes
// grows the heap by before a collection). With RELAY_MEM_DEBUG set to a file name, it
// also writes a heap profile there each time it measures.
func BenchmarkRelayIdleMemory(b *testing.B) {
	benchRelayIdleMemory(b, false)
}

// BenchmarkRelayIdleMemoryTLS is BenchmarkRelayIdleMemory with TLS
// toward the client (wss://, a P-256 certificate). The client's ends,
// counted too, are TLS connections as well, so compare builds, not the
// figure with the plain one.
func BenchmarkRelayIdleMemoryTLS(b *testing.B) {
	benchRelayIdleMemory(b, true)
}

// benchRelayFront starts the echo home in another process and returns an
// unstarted server whose handler relays to it through a new proxy, the
// proxy, and the channel that receives once per relay that ended (room
// for n).
func benchRelayFront(b *testing.B, n int) (*httptest.Server, *Proxy, <-chan struct{}) {
	b.Helper()
	u := &url.URL{Scheme: "http", Host: startWSHome(b)}
	p := New(testOptions())
	b.Cleanup(p.Close)
	ended := make(chan struct{}, n)
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.Serve(&detachWriter{ResponseWriter: w, ended: ended}, r, &forward.Route{Kind: "node", Name: "n", Upstream: u})
	}))
	return s, p, ended
}

func benchRelayIdleMemory(b *testing.B, overTLS bool) {
	const n = 2000
	s, _, ended := benchRelayFront(b, n)
	dial := func(addr string) (net.Conn, error) { return net.Dial("tcp", addr) }
	if overTLS {
		s.TLS = &tls.Config{Certificates: []tls.Certificate{benchCert(b)}}
		s.StartTLS()
		conf := s.Client().Transport.(*http.Transport).TLSClientConfig
		dial = func(addr string) (net.Conn, error) { return tls.Dial("tcp", addr, conf) }
	} else {
		s.Start()
	}
	defer s.Close()
	addr := s.Listener.Addr().String()
	for b.Loop() {
		heap0, rss0 := memNow()
		alloc0 := allocated()
		conns := make([]net.Conn, 0, n)
		for range n {
			c, err := openIdleWS(dial, addr)
			if err != nil {
				b.Fatal(err)
			}
			conns = append(conns, c)
		}
		alloc1 := allocated()
		heap1, rss1 := memNow()
		b.ReportMetric(float64(heap1-heap0)/1024/n, "KiB/conn")
		b.ReportMetric(float64(rss1-rss0)/1024/n, "RSS-KiB/conn")
		b.ReportMetric(float64(alloc1-alloc0)/1024/n, "alloc-KiB/conn")
		for _, c := range conns {
			c.Close()
		}
		for range n {
			<-ended
		}
	}
}

// allocated is what the process has allocated on the heap so far.
func allocated() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// memNow is the heap in use plus the goroutine stacks after two
// collections, and the resident set size.
func memNow() (heap, rss int64) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		var size, res int64
		if _, err := fmt.Sscan(string(b), &size, &res); err == nil {
			rss = res * int64(os.Getpagesize())
		}
	}
	if os.Getenv("RELAY_MEM_DEBUG") != "" {
		fmt.Fprintf(os.Stderr, "heap %d alloc %d stack %d goroutines %d\n", ms.HeapInuse>>10, ms.HeapAlloc>>10, ms.StackInuse>>10, runtime.NumGoroutine())
		if f, err := os.Create(os.Getenv("RELAY_MEM_DEBUG")); err == nil {
			_ = pprof.WriteHeapProfile(f)
			f.Close()
		}
	}
	return int64(ms.HeapInuse + ms.StackInuse), rss
}

// benchCert is a fresh self-signed P-256 certificate for 127.0.0.1.
func benchCert(b *testing.B) tls.Certificate {
	b.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"example.com"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		b.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// BenchmarkRelayEcho measures one round trip of a small message over a
// relayed WebSocket (client to home and back, the echo home in another
// process), with 16 WebSockets in turn so that each direction of each
// relay waits for its next message between two trips, as relays of
// chatty but not busy pages do. cpu-µs/op is this process's CPU per
// round trip (the relay's and the client's).
func BenchmarkRelayEcho(b *testing.B) {
	benchRelayEcho(b, 0)
}

// BenchmarkRelayEchoPaced is BenchmarkRelayEcho with each relay getting
// its next message about 100 ms after its last (a pause between two trips
// of 1/16 of that), as a page that sends a status ten times a second
// does: too slow for the netpoller's wait to be free, too fast for
// parking every time to pay. parks/op is how many times a pump parked
// per round trip (each park and its wake-up cost about 25 µs of CPU:
// compare BenchmarkRelayEcho's cpu-µs/op with pumps that park at once);
// cpu-µs/op counts the CPU of the whole process over the pauses too, and
// is mostly the pauses' own.
func BenchmarkRelayEchoPaced(b *testing.B) {
	benchRelayEcho(b, 100*time.Millisecond)
}

func benchRelayEcho(b *testing.B, every time.Duration) {
	const n = 16
	s, p, ended := benchRelayFront(b, n)
	s.Start()
	defer s.Close()
	dial := func(addr string) (net.Conn, error) { return net.Dial("tcp", addr) }
	conns := make([]net.Conn, 0, n)
	for range n {
		c, err := openIdleWS(dial, s.Listener.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, c)
	}
	frame := clientFrame("ping-pong")
	want := len("ping-pong") + 2
	var buf [64]byte
	cpu0, parks0 := processCPU(), p.parker.parksSoFar()
	i := 0
	for b.Loop() {
		c := conns[i%n]
		i++
		if every > 0 {
			time.Sleep(every / n)
		}
		if _, err := c.Write(frame); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf[:want]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(p.parker.parksSoFar()-parks0)/float64(b.N), "parks/op")
	for _, c := range conns {
		c.Close()
	}
	for range n {
		<-ended
	}
}

// processCPU is the CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
