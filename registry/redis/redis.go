package redis

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/registry"
)

// Options configure a Redis store. Durations are filled by the
// gateway's config defaults (RedisDefaults); zero fields are filled here
// the same way, so a test can set only what it needs.
type Options struct {
	// URL is redis://[user:password@]host:port[/db] or rediss://... (TLS).
	// With MasterName it names the credentials and database only, and
	// Addrs lists the sentinels. Required unless Addrs is set.
	URL string
	// Addrs are the sentinels' addresses (with MasterName) or the seed
	// nodes of a Redis Cluster (with Cluster). Default none: URL's host.
	Addrs []string
	// MasterName is the Sentinel master's name; setting it selects
	// Sentinel. Default "": no Sentinel.
	MasterName string
	// Cluster selects Redis Cluster over Addrs. Default false.
	Cluster bool
	// Password, when set, replaces the URL's password (a secret the
	// config keeps out of the URL). Default "": the URL's.
	Password string
	// Prefix is the hash tag of every key ("{wakegate}:homes"), so that
	// several fleets can share a server. Default "wakegate".
	Prefix string
	// DialTimeout bounds opening a connection. Default 1s.
	DialTimeout time.Duration
	// ReadTimeout bounds one command's reply. Default 1s.
	ReadTimeout time.Duration
	// WriteTimeout bounds one command's write. Default 1s.
	WriteTimeout time.Duration
	// PoolTimeout bounds the wait for a free connection. Default 1s.
	PoolTimeout time.Duration
	// PoolSize is the most connections per node. Default 10 per CPU
	// (go-redis's own default when zero).
	PoolSize int
	// Instance names the gateway in the notices it sends (DropVerdict),
	// so that it ignores its own. Default "".
	Instance string
	// Now is the clock of leases and session reports. Default (nil): the
	// Redis server's clock, one clock for the whole fleet.
	Now func() time.Time
}

// withDefaults fills the zero fields of o.
func (o Options) withDefaults() Options {
	if o.Prefix == "" {
		o.Prefix = "wakegate"
	}
	for _, d := range []*time.Duration{&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolTimeout} {
		if *d <= 0 {
			*d = time.Second
		}
	}
	return o
}

// universal turns o into go-redis's universal options.
func (o Options) universal() (*goredis.UniversalOptions, error) {
	u := &goredis.UniversalOptions{
		Addrs: o.Addrs, MasterName: o.MasterName, IsClusterMode: o.Cluster,
		DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
		PoolTimeout: o.PoolTimeout, PoolSize: o.PoolSize,
		// One retry at most: a gateway that waits on a slow store is worse
		// than one that answers 503 and lets the caller retry.
		MaxRetries: 1, ContextTimeoutEnabled: true, DialerRetries: 1,
		// RESP2: no client-side caching or push notices on the data path.
		Protocol: 2, DisableIdentity: true,
	}
	if o.URL != "" {
		p, err := goredis.ParseURL(o.URL)
		if err != nil {
			return nil, fmt.Errorf("redis url %s: %w", redactURL(o.URL), err)
		}
		if len(u.Addrs) == 0 {
			u.Addrs = []string{p.Addr}
		}
		u.Username, u.Password, u.DB, u.TLSConfig = p.Username, p.Password, p.DB, p.TLSConfig
		if u.TLSConfig != nil && u.TLSConfig.MinVersion == 0 {
			u.TLSConfig.MinVersion = tls.VersionTLS12
		}
	}
	if o.Password != "" {
		u.Password = o.Password
	}
	if len(u.Addrs) == 0 {
		return nil, errors.New("redis: neither url nor addrs is set")
	}
	return u, nil
}

// redactURL returns raw with any password replaced, for messages.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable url)"
	}
	return u.Redacted()
}

// Store is a registry.Store on a Redis server (or Sentinel-managed primary, or
// Cluster) shared by every gateway of a fleet. See scripts.go for
// what it stores and how each write is checked on the server.
//
// Reads are single commands; every guarded write, lock, renewal, release
// and session report is one Lua script. Changes are announced on one
// pub/sub channel that every instance subscribes to (Changed). A server
// that does not answer gives registry.ErrUnavailable within the client's timeouts;
// the client reconnects by itself when it is back.
type Store struct {
	// Typed is the typed record methods over this store's Tables.
	registry.Typed

	c       goredis.UniversalClient
	o       Options
	keys    redisKeys
	changes registry.Changes

	// down is why the change subscription last failed, nil while it is
	// connected (Unavailable).
	down atomic.Pointer[error]
	// silent is why the last Ping failed, nil once one passes
	// (reach.go).
	silent atomic.Pointer[error]
	// onDrop receives the verdicts other gateways dropped
	// (verdicts.go).
	onDrop atomic.Pointer[func(id string)]
	// asks carries the questions between instances (fleet.go).
	asks asks

	// cleanups undo lock commands that got no reply
	// (lockcleanup.go).
	cleanups lockCleanups

	// claim is this run's claim on its gateway's instance name
	// (names.go).
	claim nameClaim

	ps   *goredis.PubSub // the change subscription, read by listen
	stop context.CancelFunc
	wg   sync.WaitGroup
	once sync.Once
}

// redisKeys are the store's keys, all under one hash tag.
type redisKeys struct {
	// tag begins every key; the records of a kind are in the hash
	// tag+Kind.Table (hash).
	tag                                  string
	locks, lockseq, sessions, channel    string
	blobs, blobTimes, blobKeys, versions string
	adminLeases, adminLeaseSeq           string
	epoch, schema, names                 string
}

func newRedisKeys(prefix string) redisKeys {
	tag := "{" + prefix + "}:"
	return redisKeys{
		tag:   tag,
		locks: tag + "locks", lockseq: tag + "lockseq", sessions: tag + "sessions", channel: tag + "changes",
		blobs: tag + "blobs", blobTimes: tag + "blobtimes", blobKeys: tag + "blobkeys",
		versions: tag + "versions", adminLeases: tag + "adminleases", adminLeaseSeq: tag + "adminleaseseq",
		epoch: tag + "epoch", schema: tag + "schema", names: tag + "names",
	}
}

// redisOpenTimeout bounds the first contact with the server at open.
const redisOpenTimeout = 5 * time.Second

// Open connects to the server o names, checks that it answers, and
// subscribes to the change channel. Close it to stop its subscription.
func Open(ctx context.Context, o Options) (*Store, error) {
	o = o.withDefaults()
	uo, err := o.universal()
	if err != nil {
		return nil, fmt.Errorf("registry: open redis store: %w", err)
	}
	r := &Store{c: goredis.NewUniversalClient(uo), o: o, keys: newRedisKeys(o.Prefix)}
	r.Typed = registry.Typed{Tables: r}
	octx, cancel := context.WithTimeout(ctx, redisOpenTimeout)
	defer cancel()
	if err := r.c.Ping(octx).Err(); err != nil {
		_ = r.c.Close()
		return nil, fmt.Errorf("registry: open redis store at %s: %w", r.where(), r.fail(octx, err))
	}
	if err := r.checkSchema(octx); err != nil {
		_ = r.c.Close()
		return nil, err
	}
	ps := r.c.Subscribe(octx, r.keys.channel)
	if _, err := ps.Receive(octx); err != nil {
		_ = ps.Close()
		_ = r.c.Close()
		return nil, fmt.Errorf("registry: open redis store at %s: subscribe to changes: %w", r.where(), r.fail(octx, err))
	}
	sctx, stop := context.WithCancel(context.Background())
	r.ps, r.stop = ps, stop
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.listen(sctx, ps)
	}()
	return r, nil
}

// where names the server for messages (no password).
func (r *Store) where() string {
	if r.o.URL != "" {
		return redactURL(r.o.URL)
	}
	return strings.Join(r.o.Addrs, ",")
}

// Close stops the change subscription and closes the client. Calling it
// again is a no-op.
func (r *Store) Close() error {
	var err error
	r.once.Do(func() {
		// Cancelling does not interrupt a blocked read: closing the
		// subscription does.
		r.stop()
		_ = r.ps.Close()
		r.wg.Wait()
		r.cleanups.stop()
		if cerr := r.c.Close(); cerr != nil {
			err = fmt.Errorf("registry: close redis store: %w", cerr)
		}
		r.changes.FireAll()
	})
	return err
}

// Changed returns a channel closed at the next change of key on any
// instance sharing the server (see registry.Notifier).
func (r *Store) Changed(key string) <-chan struct{} { return r.changes.Changed(key) }

// Unavailable returns why the store's server does not answer (as seen by
// its change subscription, or by the last Ping), or nil while it does.
func (r *Store) Unavailable() error {
	if err := r.lostName(); err != nil {
		return err
	}
	if p := r.down.Load(); p != nil {
		return *p
	}
	if p := r.silent.Load(); p != nil {
		return *p
	}
	return nil
}

// redisResubscribePause is the pause between attempts to receive from a
// server that does not answer.
const redisResubscribePause = 250 * time.Millisecond

// listen delivers the change channel's messages to Changed's waiters until
// ctx ends. When the subscription comes back after a failure, every waiter
// is woken: changes may have been missed meanwhile.
func (r *Store) listen(ctx context.Context, ps *goredis.PubSub) {
	t := time.NewTimer(0)
	defer t.Stop()
	<-t.C
	for {
		msg, err := ps.Receive(ctx)
		if ctx.Err() != nil {
			return
		}
		switch m := msg.(type) {
		case *goredis.Message:
			if !r.verdictDropped(m.Payload) && !r.asked(ctx, m.Payload) {
				r.changes.Fire(m.Payload)
			}
		case *goredis.Subscription:
			if r.down.Swap(nil) != nil {
				r.changes.FireAll()
			}
		}
		if err == nil {
			continue
		}
		werr := fmt.Errorf("change subscription: %w", err)
		r.down.Store(&werr)
		t.Reset(redisResubscribePause)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// nowArg is the scripts' "now" argument: "" for the server's clock.
func (r *Store) nowArg() string {
	if r.o.Now == nil {
		return ""
	}
	return strconv.FormatInt(r.o.Now().UnixMilli(), 10)
}

// fail sorts an error of the client: the caller's context first, then a
// server that does not answer (registry.ErrUnavailable); a reply error of the
// server that says it cannot serve now (loading, failing over) is
// unavailable too.
func (r *Store) fail(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%w (%w)", cerr, err)
	}
	var rerr goredis.Error
	if errors.As(err, &rerr) {
		msg := rerr.Error()
		for _, p := range []string{"LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "BUSY"} {
			if strings.HasPrefix(msg, p) {
				return fmt.Errorf("%w: %w", err, registry.ErrUnavailable)
			}
		}
		return err
	}
	return fmt.Errorf("redis at %s: %w: %w", r.where(), err, registry.ErrUnavailable)
}

// hash returns the Redis hash that holds the records of k.
func (r *Store) hash(k registry.Kind) string { return r.keys.tag + k.Table }

// GetRecord returns the stored JSON of key in k's hash (see
// registry.Tables).
func (r *Store) GetRecord(ctx context.Context, k registry.Kind, key string) ([]byte, error) {
	raw, err := r.c.HGet(ctx, r.hash(k), key).Bytes()
	switch {
	case errors.Is(err, goredis.Nil):
		return nil, registry.ErrNotFound
	case err != nil:
		return nil, r.fail(ctx, err)
	}
	return raw, nil
}

// EachRecord calls fn with every record of k's hash, read in one command,
// in key order.
func (r *Store) EachRecord(ctx context.Context, k registry.Kind, fn func(key string, raw []byte) error) error {
	all, err := r.c.HGetAll(ctx, r.hash(k)).Result()
	if err != nil {
		return r.fail(ctx, err)
	}
	keys := make([]string, 0, len(all))
	for key := range all {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	for _, key := range keys {
		if err := fn(key, []byte(all[key])); err != nil {
			return err
		}
	}
	return nil
}

// cas runs casScript for one record: op "put" writes raw, "del" deletes.
// change is the key announced on success.
func (r *Store) cas(ctx context.Context, hash, key, op string, raw []byte, cond registry.Cond, change string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	res, err := casScript.Run(ctx, r.c, []string{hash, r.keys.locks},
		key, op, cond.Generation, cond.Owner, raw, cond.Fence.Lock, cond.Fence.Token,
		r.keys.channel, change, r.nowArg()).Text()
	if err != nil {
		return r.fail(ctx, err)
	}
	why, detail, _ := strings.Cut(res, ":")
	switch why {
	case "ok":
		return nil
	case "notfound":
		return fmt.Errorf("expected generation %d: %w", cond.Generation, registry.ErrNotFound)
	case "conflict":
		return fmt.Errorf("%s: %w", detail, registry.ErrConflict)
	case "lost":
		return fmt.Errorf("%s: %w", detail, registry.ErrLeaseLost)
	}
	return fmt.Errorf("unexpected reply %q from the store's script", res)
}

// PutRecord writes raw under key if the stored record matches cond, checked
// on the server with the fence in one script (casScript), which announces
// the change.
func (r *Store) PutRecord(ctx context.Context, k registry.Kind, key string, raw []byte, cond registry.Cond) error {
	return r.cas(ctx, r.hash(k), key, "put", raw, cond, k.ChangeKey(key))
}

// DeleteRecord removes the record under key if it matches cond, as
// PutRecord writes.
func (r *Store) DeleteRecord(ctx context.Context, k registry.Kind, key string, cond registry.Cond) error {
	return r.cas(ctx, r.hash(k), key, "del", nil, cond, k.ChangeKey(key))
}

var _ registry.Store = (*Store)(nil)
