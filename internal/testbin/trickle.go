package testbin

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"time"
)

// Trickle writes one byte on c every period until the server answers, and
// returns the answer with its body read (nil when the connection broke
// without one): a client whose request body arrives too slowly.
func Trickle(c net.Conn, every time.Duration) *http.Response {
	answered := make(chan *http.Response, 1)
	go func() {
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
		}
		answered <- res
	}()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case res := <-answered:
			return res
		case <-tick.C:
			if _, err := c.Write([]byte{'x'}); err != nil {
				return <-answered
			}
		}
	}
}
