package edge

import (
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wakegate/wakegate/access"
)

// ConnLimit caps the open connections of each client IP on the public
// listener (server.max_conns_per_client). A connection past the cap is
// closed as soon as it is accepted, before TLS or a byte of HTTP, and
// counted. A trusted proxy's connections carry many clients and are not
// capped as such: each request that comes through one counts, while it
// runs, for the client the proxy forwards it for (X-Forwarded-For), and
// one past that client's cap is refused with 429 and counted.
type ConnLimit struct {
	max     int
	client  access.ClientIP
	refused prometheus.Counter
	// rate, when set, takes a new connection of ip from its client's
	// connection rate (limits.conn_rate): 0, or how long until one would
	// be allowed, and the connection is then closed at once (SetRate).
	rate func(ip netip.Addr) time.Duration

	mu   sync.Mutex
	open map[netip.Addr]int
}

// NewConnLimit caps each client's connections at max; client resolves the
// client of a request a trusted proxy forwards, and refused counts the
// connections closed on accept.
func NewConnLimit(max int, client access.ClientIP, refused prometheus.Counter) *ConnLimit {
	return &ConnLimit{max: max, client: client, refused: refused, open: map[netip.Addr]int{}}
}

// SetRate has each new connection of a client taken from its rate as
// well (limits.conn_rate): rate returns 0 to let it in, else how long
// until one would be, and the connection is then closed at once (before
// any request: no access log line, but rate itself counts and logs it).
// Call it before the listener serves.
func (l *ConnLimit) SetRate(rate func(ip netip.Addr) time.Duration) { l.rate = rate }

// Listener returns ln with its accepted connections counted against the
// cap: one past its client's cap is closed at once.
func (l *ConnLimit) Listener(ln net.Listener) net.Listener { return limitListener{Listener: ln, l: l} }

// limitListener is a listener whose connections ConnLimit counts.
type limitListener struct {
	net.Listener
	l *ConnLimit
}

// Accept accepts the next connection under its client's cap.
func (l limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip, ok := l.l.take(c.RemoteAddr())
		if ok {
			return &limitConn{Conn: c, l: l.l, ip: ip}, nil
		}
		_ = c.Close()
		l.l.refused.Inc()
	}
}

// take counts a connection from addr; false means the client is at its cap.
func (l *ConnLimit) take(addr net.Addr) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return netip.Addr{}, true // not an IP peer: not capped
	}
	ip := ap.Addr().Unmap()
	if l.client.TrustedAddr(ip) {
		return netip.Addr{}, true
	}
	l.mu.Lock()
	if l.open[ip] >= l.max {
		l.mu.Unlock()
		return netip.Addr{}, false
	}
	l.open[ip]++
	l.mu.Unlock()
	if l.rate != nil && l.rate(ip) > 0 {
		l.Release(ip)
		return netip.Addr{}, false
	}
	return ip, true
}

// Release gives back the place TakeForwarded took for ip (nothing for an
// invalid ip).
func (l *ConnLimit) Release(ip netip.Addr) {
	if !ip.IsValid() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[ip]--; l.open[ip] <= 0 {
		delete(l.open, ip)
	}
}

// limitConn gives its place back once, when it is closed.
type limitConn struct {
	net.Conn
	l    *ConnLimit
	ip   netip.Addr
	once sync.Once
}

// PlainConn lets a WebSocket relay wait on the connection underneath
// (proxy.PlainConn).
func (c *limitConn) PlainConn() net.Conn { return c.Conn }

// ReadsWritesThrough tells the HTTP/1.1 loop that c's reads and writes
// are those of the connection beneath, which it may then do on the socket.
func (c *limitConn) ReadsWritesThrough() net.Conn { return c.Conn }

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.Release(c.ip) })
	return err
}

// TakeForwarded counts a request that a trusted proxy forwards for the
// client it names, resolved exactly as the rate limits resolve it
// (access.ClientIP: the client-IP header, else the nearest X-Forwarded-For
// hop that is not a trusted proxy). It returns that client (invalid when
// the proxy names none) and false when the client is at its cap.
func (l *ConnLimit) TakeForwarded(r *http.Request) (netip.Addr, bool) {
	ip := l.client.Addr(r)
	if !ip.IsValid() || l.client.TrustedAddr(ip) {
		return netip.Addr{}, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[ip] >= l.max {
		return netip.Addr{}, false
	}
	l.open[ip]++
	return ip, true
}
