package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// A lock command whose reply the client never had (it timed out, or the
// connection broke) may still run on the server later: Redis executes what
// it read once it runs again. Left alone, such a late lease would hold its
// lock for its whole ttl with nobody to release it. Every Lock carries an
// attempt nonce stored with the lease; when a Lock gets no reply, the store
// keeps trying abandonScript with that nonce until the server answers (or
// the lease would have expired by itself), which deletes the lease only if
// that very command took it.

// abandonPause is the first pause between tries to undo an unanswered
// lock command; it doubles up to abandonPauseMax.
const (
	abandonPause    = 100 * time.Millisecond
	abandonPauseMax = time.Second
	// abandonTry bounds one try.
	abandonTry = 2 * time.Second
)

// lockCleanups owns the goroutines that undo unanswered lock commands.
// Its zero value is ready; stop ends them and waits.
type lockCleanups struct {
	mu      sync.Mutex
	ctx     context.Context
	cancel  context.CancelFunc
	stopped bool
	wg      sync.WaitGroup
}

// newAttempt returns a fresh nonce for one lock command.
func newAttempt() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// unanswered reports whether err means the server gave no reply to a
// command (so it may run it later), rather than a reply that is an error.
func unanswered(err error) bool {
	var rerr goredis.Error
	return err != nil && !errors.As(err, &rerr)
}

// abandon undoes the lock command attempt on name in the background: it
// tries until the server answers, the lease the command could have taken
// has run out (ttl from now), or the store is closed.
func (r *Store) abandon(name, attempt string, ttl time.Duration) {
	c := &r.cleanups
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return
	}
	if c.ctx == nil {
		c.ctx, c.cancel = context.WithCancel(context.Background())
	}
	ctx, cancel := context.WithTimeout(c.ctx, ttl)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer cancel()
		r.abandonUntil(ctx, name, attempt)
	}()
}

// abandonUntil runs abandonScript for attempt until it gets a reply or ctx
// ends.
func (r *Store) abandonUntil(ctx context.Context, name, attempt string) {
	pause := abandonPause
	t := time.NewTimer(pause)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		tctx, cancel := context.WithTimeout(ctx, abandonTry)
		err := abandonScript.Run(tctx, r.c, []string{r.keys.locks}, name, attempt, r.keys.channel).Err()
		cancel()
		if err == nil || !unanswered(err) {
			return
		}
		pause = min(2*pause, abandonPauseMax)
		t.Reset(pause)
	}
}

// stop ends every cleanup and waits for them. Calling it again is a no-op.
func (c *lockCleanups) stop() {
	c.mu.Lock()
	c.stopped = true
	if c.cancel != nil {
		c.cancel()
	}
	c.mu.Unlock()
	c.wg.Wait()
}
