package proxy

import (
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// echoHome answers every message with itself.
func echoHome(c *websocket.Conn) {
	for {
		mt, msg, err := c.ReadMessage()
		if err != nil {
			return
		}
		if err := c.WriteMessage(mt, msg); err != nil {
			return
		}
	}
}

// wssHome starts a WebSocket upstream over TLS that runs serve on each
// upgraded connection, and has p's transports trust it.
func wssHome(t *testing.T, p *Proxy, serve func(c *websocket.Conn)) *url.URL {
	t.Helper()
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	s := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		serve(c)
	}))
	t.Cleanup(s.Close)
	conf := s.Client().Transport.(*http.Transport).TLSClientConfig
	for _, tr := range append([]*http.Transport{p.transport, p.homes}, p.upgrades[:]...) {
		tr.TLSClientConfig = conf
	}
	u, err := url.Parse(s.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// tlsRelay serves a relay over TLS toward the client, and toward the
// home too when homeTLS, with serve as the home.
func tlsRelay(t *testing.T, homeTLS bool, serve func(c *websocket.Conn)) (*httptest.Server, *Proxy, <-chan struct{}) {
	t.Helper()
	if !homeTLS {
		return newDetachedFront(t, wsServer(t, serve), true)
	}
	var home *url.URL
	s, p, ended := newDetachedFront(t, func() *url.URL { return home }, true)
	home = wssHome(t, p, serve)
	return s, p, ended
}

// TestRelayOverTLSIdleHoldsNoBuffer opens WebSockets over TLS (toward
// the client, and toward the home too), has each exchange messages and
// go idle: no pump holds a buffer while it waits, the one whose source
// is a TLS connection included.
func TestRelayOverTLSIdleHoldsNoBuffer(t *testing.T) {
	t.Parallel()
	for _, homeTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain home", true: "tls home"}[homeTLS], func(t *testing.T) {
			s, p, _ := tlsRelay(t, homeTLS, echoHome)
			const n = 20
			var wg sync.WaitGroup
			for i := range n {
				c := wsDial(t, s)
				wg.Go(func() {
					// Two messages in a row, so that a TLS read can find
					// the second record already buffered behind the first.
					for _, m := range [][]byte{[]byte("hi"), message('c', i+1)} {
						if err := c.WriteMessage(websocket.BinaryMessage, m); err != nil {
							t.Error(err)
							return
						}
					}
					for range 2 {
						if _, _, err := c.ReadMessage(); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			deadline := time.Now().Add(testWait)
			for p.relayBufs.Load() != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("%d buffers still out with every relay idle", p.relayBufs.Load())
				}
				runtime.Gosched()
			}
		})
	}
}

// TestRelayOverTLSBothDirectionsAtOnce sends thousands of messages each
// way at once over TLS on both sides, of every size up to three relay
// buffers: each side reads every message of the other, whole and in
// order (a pump that waited on the socket while its TLS connection still
// held a record would stall here), and the relay ends once both closed.
func TestRelayOverTLSBothDirectionsAtOnce(t *testing.T) {
	t.Parallel()
	const n = 3000
	homeErr := make(chan error, 1)
	s, _, ended := tlsRelay(t, true, func(c *websocket.Conn) {
		_ = c.SetReadDeadline(time.Now().Add(testWait))
		homeErr <- exchange(c, 'h', 'c', n)
		_, _, _ = c.ReadMessage() // the client's close
	})
	exchangeBoth(t, s, ended, homeErr, n, true)
}

// TestRelayOverTLSBytesBehindHandshake has clients send a first frame
// right behind their upgrade request, in a record of its own: the server
// may have read that record from the socket with the request, so the
// client's pump finds it in the TLS connection, not on the socket, and
// each echo comes back.
func TestRelayOverTLSBytesBehindHandshake(t *testing.T) {
	t.Parallel()
	s, _, _ := tlsRelay(t, false, echoHome)
	conf := s.Client().Transport.(*http.Transport).TLSClientConfig
	dial := func(addr string) (net.Conn, error) { return tls.Dial("tcp", addr, conf) }
	for range 20 {
		c, err := openIdleWS(dial, s.Listener.Addr().String())
		if err != nil {
			t.Fatalf("the first frame's echo: %v", err)
		}
		c.Close()
	}
}
