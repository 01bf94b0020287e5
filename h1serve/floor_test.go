package h1serve

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestFloorSparesAnIdleWriter: a response that waits on its source for
// longer than the floor's grace and slack between writes (as an event
// stream does) is not held to the floor for that time: the client reads
// everything, and every write succeeds, and the next request on the
// connection has no deadline left over.
func TestFloorSparesAnIdleWriter(t *testing.T) {
	t.Parallel()
	const part = 1 << 10
	errs := make(chan error, 4)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/after" {
			_, _ = io.WriteString(w, "ok")
			return
		}
		if !w.(*response).SetWriteFloor(240, 200*time.Millisecond) {
			errs <- errFloorRefused
			return
		}
		w.Header().Set("Content-Length", "3072")
		for i := range 3 {
			if i > 0 {
				time.Sleep(2500 * time.Millisecond) // past 200ms and 2s of slack
			}
			if _, err := io.WriteString(w, strings.Repeat("x", part)); err != nil {
				errs <- err
				return
			}
			if err := w.(*response).FlushError(); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	})
	_, addr := startFast(t, h)
	c := dialRaw(t, addr)
	if _, err := io.WriteString(c, "GET /events HTTP/1.1\r\nHost: t\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	if err != nil || len(body) != 3*part {
		t.Fatalf("read %d bytes, %v; want %d", len(body), err, 3*part)
	}
	if err := <-errs; err != nil {
		t.Fatalf("a write under the floor failed: %v", err)
	}
	// The connection goes on, its deadline lifted.
	time.Sleep(300 * time.Millisecond)
	if _, err := io.WriteString(c, "GET /after HTTP/1.1\r\nHost: t\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the next request: %v", err)
	}
	_ = res.Body.Close()
}

type floorError string

func (e floorError) Error() string { return string(e) }

const errFloorRefused = floorError("the floor was refused on a plain TCP connection")
