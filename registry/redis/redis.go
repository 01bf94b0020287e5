package redis

import (
	"context"
	"crypto/tls"
	"encoding/json"
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

	ps   *goredis.PubSub // the change subscription, read by listen
	stop context.CancelFunc
	wg   sync.WaitGroup
	once sync.Once
}

// redisKeys are the store's keys, all under one hash tag.
type redisKeys struct {
	homes, apps, claims, target, locks, lockseq, sessions, channel string
	blobs, blobTimes, blobKeys, versions                           string
	adminLeases, adminLeaseSeq                                     string
	appStates, epoch, schema                                       string
}

func newRedisKeys(prefix string) redisKeys {
	tag := "{" + prefix + "}:"
	return redisKeys{
		homes: tag + "homes", apps: tag + "apps", claims: tag + "claims", target: tag + "target",
		locks: tag + "locks", lockseq: tag + "lockseq", sessions: tag + "sessions", channel: tag + "changes",
		blobs: tag + "blobs", blobTimes: tag + "blobtimes", blobKeys: tag + "blobkeys",
		versions: tag + "versions", adminLeases: tag + "adminleases", adminLeaseSeq: tag + "adminleaseseq",
		appStates: tag + "appstates", epoch: tag + "epoch", schema: tag + "schema",
	}
}

// targetField is the target's field in its hash.
const targetField = "target"

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

// get reads one record of hash key.
func redisGet[T any](ctx context.Context, r *Store, hash, kind, key string) (T, error) {
	var v T
	raw, err := r.c.HGet(ctx, hash, key).Result()
	switch {
	case errors.Is(err, goredis.Nil):
		return v, fmt.Errorf("registry: get %s %s: %w", kind, key, registry.ErrNotFound)
	case err != nil:
		return v, fmt.Errorf("registry: get %s %s: %w", kind, key, r.fail(ctx, err))
	}
	if err := registry.Decode([]byte(raw), &v); err != nil {
		return v, fmt.Errorf("registry: get %s %s: decode stored %s: %w", kind, key, kind, err)
	}
	return v, nil
}

// redisList reads every record of hash, ordered by key.
func redisList[T any](ctx context.Context, r *Store, hash, kind string) ([]T, error) {
	all, err := r.c.HGetAll(ctx, hash).Result()
	if err != nil {
		return nil, fmt.Errorf("registry: list %s: %w", kind, r.fail(ctx, err))
	}
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]T, 0, len(keys))
	for _, k := range keys {
		var v T
		if err := registry.Decode([]byte(all[k]), &v); err != nil {
			return nil, fmt.Errorf("registry: list %s: decode stored %s %s: %w", kind, kind, k, err)
		}
		out = append(out, v)
	}
	return out, nil
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

// redisPut writes v if the stored record matches cond; the record written
// and returned has generation cond.Generation+1 (set by setGen).
func redisPut[T any](ctx context.Context, r *Store, hash, kind, key string, cond registry.Cond, v T, setGen func(*T, uint64)) (T, error) {
	setGen(&v, cond.Generation+1)
	raw, err := json.Marshal(v)
	if err != nil {
		var zero T
		return zero, fmt.Errorf("registry: put %s %s: encode: %w", kind, key, err)
	}
	if err := r.cas(ctx, hash, key, "put", raw, cond, kind+":"+key); err != nil {
		var zero T
		return zero, fmt.Errorf("registry: put %s %s: %w", kind, key, err)
	}
	return v, nil
}

// redisDelete removes the record under key if it matches cond.
func (r *Store) redisDelete(ctx context.Context, hash, kind, key string, cond registry.Cond) error {
	if err := r.cas(ctx, hash, key, "del", nil, cond, kind+":"+key); err != nil {
		return fmt.Errorf("registry: delete %s %s: %w", kind, key, err)
	}
	return nil
}

// GetHome returns one home by id.
func (r *Store) GetHome(ctx context.Context, id string) (registry.Home, error) {
	return redisGet[registry.Home](ctx, r, r.keys.homes, "home", id)
}

// ListHomes returns every home, ordered by id.
func (r *Store) ListHomes(ctx context.Context) ([]registry.Home, error) {
	return redisList[registry.Home](ctx, r, r.keys.homes, "homes")
}

// PutHome writes h if the stored record matches cond (see registry.Store).
func (r *Store) PutHome(ctx context.Context, h registry.Home, cond registry.Cond) (registry.Home, error) {
	if err := h.Validate(); err != nil {
		return registry.Home{}, fmt.Errorf("registry: put home %s: %w", h.ID, err)
	}
	return redisPut(ctx, r, r.keys.homes, "home", h.ID, cond, h, func(h *registry.Home, gen uint64) { h.Generation = gen })
}

// DeleteHome removes a home if the stored record matches cond.
func (r *Store) DeleteHome(ctx context.Context, id string, cond registry.Cond) error {
	return r.redisDelete(ctx, r.keys.homes, "home", id, cond)
}

// GetApp returns one stored app by slug.
func (r *Store) GetApp(ctx context.Context, slug string) (registry.App, error) {
	return redisGet[registry.App](ctx, r, r.keys.apps, "app", slug)
}

// ListApps returns every stored app, ordered by slug.
func (r *Store) ListApps(ctx context.Context) ([]registry.App, error) {
	return redisList[registry.App](ctx, r, r.keys.apps, "apps")
}

// PutApp writes a if the stored record matches cond (see registry.Store).
func (r *Store) PutApp(ctx context.Context, a registry.App, cond registry.Cond) (registry.App, error) {
	if a.Slug == "" {
		return registry.App{}, errors.New("registry: put app: slug is empty")
	}
	return redisPut(ctx, r, r.keys.apps, "app", a.Slug, cond, a, func(a *registry.App, gen uint64) { a.Generation = gen })
}

// DeleteApp removes an app if the stored record matches cond.
func (r *Store) DeleteApp(ctx context.Context, slug string, cond registry.Cond) error {
	return r.redisDelete(ctx, r.keys.apps, "app", slug, cond)
}

// GetClaim returns the claim on target.
func (r *Store) GetClaim(ctx context.Context, target string) (registry.Claim, error) {
	return redisGet[registry.Claim](ctx, r, r.keys.claims, "claim", target)
}

// ListClaims returns every claim, ordered by target.
func (r *Store) ListClaims(ctx context.Context) ([]registry.Claim, error) {
	return redisList[registry.Claim](ctx, r, r.keys.claims, "claims")
}

// PutClaim writes c if the stored claim matches cond (see registry.Store).
func (r *Store) PutClaim(ctx context.Context, c registry.Claim, cond registry.Cond) (registry.Claim, error) {
	if c.Target == "" || c.Home == "" {
		return registry.Claim{}, fmt.Errorf("registry: put claim %q: target and home are required", c.Target)
	}
	return redisPut(ctx, r, r.keys.claims, "claim", c.Target, cond, c, func(c *registry.Claim, gen uint64) { c.Generation = gen })
}

// DeleteClaim removes the claim on target if it matches cond.
func (r *Store) DeleteClaim(ctx context.Context, target string, cond registry.Cond) error {
	return r.redisDelete(ctx, r.keys.claims, "claim", target, cond)
}

// GetTarget returns the roll target, or registry.ErrNotFound when none is set.
func (r *Store) GetTarget(ctx context.Context) (registry.Target, error) {
	t, err := redisGet[registry.Target](ctx, r, r.keys.target, "target", targetField)
	if err != nil {
		return registry.Target{}, err
	}
	return t, nil
}

// PutTarget writes the target if the stored one matches cond.
func (r *Store) PutTarget(ctx context.Context, t registry.Target, cond registry.Cond) (registry.Target, error) {
	t.Generation = cond.Generation + 1
	raw, err := json.Marshal(t)
	if err != nil {
		return registry.Target{}, fmt.Errorf("registry: put target: encode: %w", err)
	}
	if err := r.cas(ctx, r.keys.target, targetField, "put", raw, cond, registry.TargetKey); err != nil {
		return registry.Target{}, fmt.Errorf("registry: put target: %w", err)
	}
	return t, nil
}

// GetAppState returns the desired state stored for slug.
func (r *Store) GetAppState(ctx context.Context, slug string) (registry.AppState, error) {
	return redisGet[registry.AppState](ctx, r, r.keys.appStates, "appstate", slug)
}

// ListAppStates returns every stored desired state, ordered by slug.
func (r *Store) ListAppStates(ctx context.Context) ([]registry.AppState, error) {
	return redisList[registry.AppState](ctx, r, r.keys.appStates, "appstates")
}

// PutAppState writes s if the stored record matches cond (see registry.Store).
func (r *Store) PutAppState(ctx context.Context, s registry.AppState, cond registry.Cond) (registry.AppState, error) {
	if err := s.Validate(); err != nil {
		return registry.AppState{}, fmt.Errorf("registry: put app state %s: %w", s.Slug, err)
	}
	return redisPut(ctx, r, r.keys.appStates, "appstate", s.Slug, cond, s, func(s *registry.AppState, gen uint64) { s.Generation = gen })
}

var _ registry.Store = (*Store)(nil)
