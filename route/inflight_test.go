package route

import (
	"sync"
	"testing"
	"time"
)

// TestInflightAddDuringWait starts and ends requests while a drain
// waits (under -race this is what a sync.WaitGroup forbids), and checks
// Wait returns only once the count is back at zero.
func TestInflightAddDuringWait(t *testing.T) {
	var c Inflight
	c.Wait() // zero: returns at once
	c.Add(1)
	waited := make(chan struct{})
	go func() {
		c.Wait()
		close(waited)
	}()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				c.Add(1)
				c.Done()
			}
		})
	}
	wg.Wait()
	select {
	case <-waited:
		t.Fatal("Wait returned while a request was still counted")
	default:
	}
	c.Done()
	select {
	case <-waited:
	case <-time.After(20 * time.Second): // a guard against a hang
		t.Fatal("Wait did not return once the count was zero")
	}
	if n := c.n.Load(); n != 0 {
		t.Fatalf("count %d after every Done", n)
	}
}
