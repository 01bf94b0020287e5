package gateway_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
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
	// Every upload has begun its body before the GET.
	time.Sleep(time.Second)

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
