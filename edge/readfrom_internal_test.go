package edge

import (
	"bytes"
	"io"
	"net"
	"testing"
)

// countingConn is a connection whose ReadFrom is counted before it goes
// to the connection underneath (a *net.TCPConn, which splices).
type countingConn struct {
	net.Conn
	readFroms int
}

func (c *countingConn) ReadFrom(src io.Reader) (int64, error) {
	c.readFroms++
	return c.Conn.(io.ReaderFrom).ReadFrom(src)
}

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// TestConnWrappersPassReadFrom sends a body from one TCP connection to
// another through the public listener's wrappers (limitConn inside
// framingConn, as Serve stacks them): the wrappers hand it to the
// connection's own ReadFrom, and every byte arrives. Over a connection
// without ReadFrom (a pipe) the wrappers copy through Write.
func TestConnWrappersPassReadFrom(t *testing.T) {
	body := make([]byte, 1<<20)
	for i := range body {
		body[i] = byte(i * 31 / 7)
	}
	upClient, upServer := tcpPair(t) // the upstream writes on upServer
	downClient, downServer := tcpPair(t)
	counted := &countingConn{Conn: downServer}
	wrapped := &framingConn{Conn: &limitConn{Conn: counted, l: &ConnLimit{}}, scan: new(framingScan)}

	go func() { _, _ = upServer.Write(body) }()
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, len(body))
		_, err := io.ReadFull(downClient, b)
		if err != nil {
			b = nil
		}
		got <- b
	}()
	n, err := wrapped.ReadFrom(&io.LimitedReader{R: upClient, N: int64(len(body))})
	if err != nil || n != int64(len(body)) {
		t.Fatalf("ReadFrom = %d, %v; want %d bytes", n, err, len(body))
	}
	if counted.readFroms != 1 {
		t.Errorf("the connection's ReadFrom ran %d times, want 1: a wrapper hid it", counted.readFroms)
	}
	if b := <-got; !bytes.Equal(b, body) {
		t.Fatal("the body arrived changed or short")
	}

	pc, ps := net.Pipe()
	defer pc.Close()
	defer ps.Close()
	wrapped = &framingConn{Conn: &limitConn{Conn: ps, l: &ConnLimit{}}, scan: new(framingScan)}
	go func() {
		_, _ = wrapped.ReadFrom(bytes.NewReader(body[:1000]))
		ps.Close()
	}()
	b, err := io.ReadAll(pc)
	if err != nil || !bytes.Equal(b, body[:1000]) {
		t.Fatalf("through a pipe: %d bytes, %v", len(b), err)
	}
}
