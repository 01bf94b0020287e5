package faultinject

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/registry/registrytest"
)

// Wake locks that die with their holder (DESIGN rule 32): after a single
// fault, every home is served again within the heartbeat's TTL (4s by
// default) plus one wake, never at the end of the wake lock's lease
// (ready_timeout + 30s).

// lockHealBound is what the tests below accept as "the heartbeat's TTL plus
// one wake", with room for a loaded machine: well under the lease of the
// wake lock they would otherwise wait for (10s + 30s).
const lockHealBound = 20 * time.Second

// servedThrough sends GET path through g until it answers 200, and returns
// how long that took from since, with the statuses seen on the way; it
// gives up at since+limit.
func servedThrough(g *fiGateway, c *http.Client, path string, since time.Time, limit time.Duration) (time.Duration, map[int]int) {
	seen := map[int]int{}
	var took time.Duration
	testbin.Poll(limit-time.Since(since), 50*time.Millisecond, func() bool {
		res, _, err := g.get(c, path)
		if err != nil {
			seen[0]++
			return false
		}
		seen[res.StatusCode]++
		if res.StatusCode != http.StatusOK {
			return false
		}
		took = time.Since(since)
		return true
	})
	return took, seen
}

func TestFleetWakeLockDiesWithItsHolder(t *testing.T) {
	srv := registrytest.StartRedis(t)
	gws := fleetStart(t, srv, 3, fiOptions{boot: "1s", admin: true,
		wake: map[string]any{"ready_timeout": "10s", "wake_timeout": "20s", "retry_after": "1s"}})
	c := fleetClient()
	go func() { _, _, _ = gws[0].get(c, fiWhoami) }() // gw-0 takes the wake lock and starts the home
	// The kill lands once the home's process exists: gw-0 holds the lock,
	// and the 1s boot has just begun.
	testbin.Eventually(t, "gw-0's wake to start the home", func() bool { return len(gws[0].homePIDs(t, fiHome)) == 1 })
	gws[0].kill(t)
	killed := time.Now()
	var wg sync.WaitGroup
	took := make([]time.Duration, 2)
	seen := make([]map[int]int, 2)
	for i, g := range gws[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			took[i], seen[i] = servedThrough(g, c, fiWhoami, killed, 90*time.Second)
		}()
	}
	wg.Wait()
	for i := range took {
		if took[i] == 0 || took[i] > lockHealBound {
			t.Fatalf("gw-%d served the home %s after the lock holder died mid wake (0: never), want within %s; statuses %v\n%s",
				i+1, took[i].Round(100*time.Millisecond), lockHealBound, seen[i], gws[i+1].Output())
		}
	}
	t.Logf("runner SIGKILLed as its cold wake started the home: served through gw-1 after %s %v, gw-2 after %s %v",
		took[0].Round(100*time.Millisecond), seen[0], took[1].Round(100*time.Millisecond), seen[1])
}

func TestFleetRedisPauseLeavesNoLock(t *testing.T) {
	srv := registrytest.StartRedis(t)
	gws := fleetStart(t, srv, 3, fiOptions{boot: "1s",
		wake:  map[string]any{"ready_timeout": "10s", "wake_timeout": "20s", "retry_after": "1s"},
		extra: map[string]any{"homes": fleetTwoHomes}})
	c := &http.Client{Timeout: 30 * time.Second}
	for _, g := range gws {
		mustGet(t, g, c) // h1 warm everywhere; h2 (bob) cold
	}
	srv.Pause()
	paused := time.Now()
	resumed := false
	defer func() {
		if !resumed {
			srv.Resume()
		}
	}()
	// Cold wakes of h2 through every gateway while Redis is frozen: their
	// lock commands reach the server and get no reply.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for _, g := range gws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, _, _ = g.get(c, "/node/bob/whoami")
				time.Sleep(100 * time.Millisecond)
			}
		}()
	}
	time.Sleep(10*time.Second - time.Since(paused))
	close(stop)
	srv.Resume()
	resumed = true
	at := time.Now()
	wg.Wait()
	var took time.Duration
	var seen map[int]int
	for i, g := range gws {
		d, s := servedThrough(g, c, "/node/bob/whoami", at, 90*time.Second)
		if d == 0 || d > lockHealBound {
			t.Fatalf("gw-%d woke h2 %s after Redis answered again (0: never), want within %s; statuses %v\n%s",
				i, d.Round(100*time.Millisecond), lockHealBound, s, g.Output())
		}
		if i == 0 {
			took, seen = d, s
		}
	}
	t.Logf("Redis SIGSTOPped 10s during cold wakes: h2 served %s after SIGCONT %v", took.Round(100*time.Millisecond), seen)
}
