package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	goredis "github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/registry"
)

// What gateways of one fleet need from each other beyond records:
//
//   - the store's epoch, a random value written once by whichever gateway
//     finds it missing. A Redis restarted without persistence comes back
//     empty: the epoch is gone, the next gateway writes a new one, and
//     every gateway that remembers the old value learns that the records
//     went with it (and heals them from what it declares and runs);
//   - the server's persistence settings, so that an operator learns at
//     start what a restart of Redis would lose;
//   - questions from one gateway to another (Ask, OnAsked), for what only
//     the gateway that runs a home's process may do: stop it. They travel
//     on the change channel, like dropped verdicts, as
//     "ask:<to>\x1f<from>\x1f<id>\x1f<body>" and come back as
//     "answer:<to>\x1f<id>\x1f<body>".

const (
	askPrefix    = "ask:"
	answerPrefix = "answer:"
	askSep       = "\x1f"
)

// Epoch returns the store's epoch, writing a new random one when it is
// missing (the store is new, or lost its data).
func (r *Store) Epoch(ctx context.Context) (string, error) {
	var b [12]byte
	_, _ = rand.Read(b[:])
	fresh := hex.EncodeToString(b[:])
	set, err := r.c.SetNX(ctx, r.keys.epoch, fresh, 0).Result()
	if err != nil {
		return "", fmt.Errorf("registry: store epoch: %w", r.fail(ctx, err))
	}
	if set {
		// A new epoch: the store is new or lost its data, its format
		// version with it. Record it again, as the open did.
		if err := r.c.SetNX(ctx, r.keys.schema, strconv.Itoa(Schema), 0).Err(); err != nil {
			return "", fmt.Errorf("registry: store format version: %w", r.fail(ctx, err))
		}
	}
	v, err := r.c.Get(ctx, r.keys.epoch).Result()
	if err != nil {
		return "", fmt.Errorf("registry: store epoch: %w", r.fail(ctx, err))
	}
	return v, nil
}

// Persistence reads the server's persistence settings.
func (r *Store) Persistence(ctx context.Context) (registry.Persistence, error) {
	aof, err := r.c.ConfigGet(ctx, "appendonly").Result()
	if err != nil {
		var rerr goredis.Error
		if errors.As(err, &rerr) {
			return registry.Persistence{}, nil // CONFIG refused: unknown
		}
		return registry.Persistence{}, fmt.Errorf("registry: read persistence settings: %w", r.fail(ctx, err))
	}
	save, err := r.c.ConfigGet(ctx, "save").Result()
	if err != nil {
		return registry.Persistence{}, fmt.Errorf("registry: read persistence settings: %w", r.fail(ctx, err))
	}
	if len(aof) == 0 {
		return registry.Persistence{}, nil
	}
	return registry.Persistence{Known: true, AOF: strings.EqualFold(aof["appendonly"], "yes"), Snapshots: save["save"]}, nil
}

// asks are the questions this instance sent and waits to have answered,
// and the function that answers the ones it is sent.
type asks struct {
	seq     atomic.Uint64
	answer  atomic.Pointer[func(ctx context.Context, from, body string) string]
	mu      sync.Mutex
	waiting map[string]chan string
}

// Ask sends body to instance to and waits for its answer until ctx ends
// (registry.ErrNoAnswer then). Nobody keeps the question: an instance that is not
// subscribed at that moment never sees it.
func (r *Store) Ask(ctx context.Context, to, body string) (string, error) {
	id := fmt.Sprintf("%s-%d", r.o.Instance, r.asks.seq.Add(1))
	ch := make(chan string, 1)
	r.asks.mu.Lock()
	if r.asks.waiting == nil {
		r.asks.waiting = map[string]chan string{}
	}
	r.asks.waiting[id] = ch
	r.asks.mu.Unlock()
	defer func() {
		r.asks.mu.Lock()
		delete(r.asks.waiting, id)
		r.asks.mu.Unlock()
	}()
	msg := askPrefix + strings.Join([]string{to, r.o.Instance, id, body}, askSep)
	if err := r.c.Publish(ctx, r.keys.channel, msg).Err(); err != nil {
		return "", fmt.Errorf("registry: ask %s: %w", to, r.fail(ctx, err))
	}
	select {
	case a := <-ch:
		return a, nil
	case <-ctx.Done():
		return "", fmt.Errorf("registry: ask %s: %w (%w)", to, registry.ErrNoAnswer, ctx.Err())
	}
}

// OnAsked sets fn to answer the questions other instances send this one;
// nil leaves them unanswered. fn runs on a goroutine of its own per
// question, with a context that ends when the store closes.
func (r *Store) OnAsked(fn func(ctx context.Context, from, body string) string) {
	if fn == nil {
		r.asks.answer.Store(nil)
		return
	}
	r.asks.answer.Store(&fn)
}

// asked handles a change message that is a question to this instance or
// an answer to one of its questions; it reports whether the message was
// either (whoever it was for).
func (r *Store) asked(ctx context.Context, payload string) bool {
	if rest, ok := strings.CutPrefix(payload, answerPrefix); ok {
		parts := strings.SplitN(rest, askSep, 3)
		if len(parts) == 3 && parts[0] == r.o.Instance {
			r.asks.mu.Lock()
			ch := r.asks.waiting[parts[1]]
			r.asks.mu.Unlock()
			if ch != nil {
				select {
				case ch <- parts[2]:
				default:
				}
			}
		}
		return true
	}
	rest, ok := strings.CutPrefix(payload, askPrefix)
	if !ok {
		return false
	}
	parts := strings.SplitN(rest, askSep, 4)
	fn := r.asks.answer.Load()
	if len(parts) != 4 || parts[0] != r.o.Instance || fn == nil {
		return true
	}
	from, id, body := parts[1], parts[2], parts[3]
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		a := (*fn)(ctx, from, body)
		msg := answerPrefix + strings.Join([]string{from, id, a}, askSep)
		// A lost answer is the asker's to report: its wait runs out.
		_ = r.c.Publish(context.WithoutCancel(ctx), r.keys.channel, msg).Err()
	}()
	return true
}

var (
	_ registry.Fleet  = (*Store)(nil)
	_ registry.Health = (*Store)(nil)
)
