package certstore_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/certstore"
	"github.com/wakegate/wakegate/registry/redis"
	"github.com/wakegate/wakegate/registry/registrytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// openRedis opens a store of its own on srv (one gateway's client),
// closed when t ends.
func openRedis(t *testing.T, srv *registrytest.RedisServer, prefix string) *redis.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := redis.Open(ctx, redis.Options{URL: srv.URL(), Prefix: prefix})
	if err != nil {
		t.Fatalf("open redis store: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// newStorage is a storage over b for holder, closed when t ends.
func newStorage(t *testing.T, b certstore.Backend, holder string, ttl, poll time.Duration) *certstore.Storage {
	t.Helper()
	s, err := certstore.New(b, certstore.Options{Holder: holder, LockTTL: ttl, Poll: poll})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// fleet is two storages, as two gateways with their own clients on one
// Redis see it.
func fleet(t *testing.T, ttl, poll time.Duration) (a, b *certstore.Storage, ra, rb *redis.Store) {
	t.Helper()
	srv := registrytest.StartRedis(t)
	prefix := fmt.Sprintf("cs-%d", time.Now().UnixNano())
	ra, rb = openRedis(t, srv, prefix), openRedis(t, srv, prefix)
	return newStorage(t, ra, "gw-a", ttl, poll), newStorage(t, rb, "gw-b", ttl, poll), ra, rb
}

// TestStorageFiles checks certmagic's file semantics: what one gateway
// stores the other loads; directories are implied by keys; List is one
// level or recursive with full keys; Delete of a directory removes
// everything under it; missing keys give fs.ErrNotExist, except Delete.
func TestStorageFiles(t *testing.T) {
	a, b, _, _ := fleet(t, time.Minute, time.Second)
	ctx := context.Background()
	files := map[string]string{
		"certificates/ca/demo.test/demo.test.crt":   "cert",
		"certificates/ca/demo.test/demo.test.key":   "key",
		"certificates/ca/demo.test/demo.test.json":  "{}",
		"certificates/ca/other.test/other.test.crt": "cert2",
		"certificates/ca0/x.crt":                    "near name", // "ca0" sorts right after "ca/"
		"acme/ca/users/ops/ops.json":                "account",
		"empty":                                     "",
	}
	for k, v := range files {
		if err := a.Store(ctx, k, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range files {
		got, err := b.Load(ctx, k)
		if err != nil || string(got) != v {
			t.Errorf("load %s: %q %v, want %q", k, got, err, v)
		}
	}
	cases := []struct {
		dir       string
		recursive bool
		want      []string
	}{
		{"certificates/ca", false, []string{"certificates/ca/demo.test", "certificates/ca/other.test"}},
		{"certificates/ca/demo.test", false, []string{"certificates/ca/demo.test/demo.test.crt",
			"certificates/ca/demo.test/demo.test.json", "certificates/ca/demo.test/demo.test.key"}},
		{"certificates", false, []string{"certificates/ca", "certificates/ca0"}},
		{"certificates/ca", true, []string{"certificates/ca/demo.test", "certificates/ca/demo.test/demo.test.crt",
			"certificates/ca/demo.test/demo.test.json", "certificates/ca/demo.test/demo.test.key",
			"certificates/ca/other.test", "certificates/ca/other.test/other.test.crt"}},
		{"", false, []string{"acme", "certificates", "empty"}},
		{"certificates/ca/demo.test/demo.test.crt", false, nil}, // a file has no entries
	}
	for _, c := range cases {
		got, err := b.List(ctx, c.dir, c.recursive)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("list %q recursive=%v: %q %v, want %q", c.dir, c.recursive, got, err, c.want)
		}
	}
	before := time.Now().Add(-time.Minute)
	for _, c := range []struct {
		key      string
		terminal bool
		size     int64
	}{
		{"certificates/ca/demo.test/demo.test.key", true, 3},
		{"empty", true, 0},
		{"certificates/ca/demo.test", false, 0},
		{"certificates", false, 0},
	} {
		ki, err := b.Stat(ctx, c.key)
		if err != nil || ki.Key != c.key || ki.IsTerminal != c.terminal || ki.Size != c.size ||
			(c.terminal && ki.Modified.Before(before)) {
			t.Errorf("stat %s: %+v %v, want terminal=%v size %d modified now", c.key, ki, err, c.terminal, c.size)
		}
		if !b.Exists(ctx, c.key) {
			t.Errorf("exists %s: false", c.key)
		}
	}
	for _, missing := range []string{"nope", "certificates/c", "certificates/ca/demo"} {
		if _, err := b.Load(ctx, missing); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("load %s: %v, want fs.ErrNotExist", missing, err)
		}
		if _, err := b.Stat(ctx, missing); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("stat %s: %v, want fs.ErrNotExist", missing, err)
		}
		if _, err := b.List(ctx, missing, true); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("list %s: %v, want fs.ErrNotExist", missing, err)
		}
		if b.Exists(ctx, missing) {
			t.Errorf("exists %s: true", missing)
		}
		if err := b.Delete(ctx, missing); err != nil {
			t.Errorf("delete %s: %v, want nil", missing, err)
		}
	}
	if err := a.Store(ctx, "empty", []byte("replaced")); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Load(ctx, "empty"); err != nil || string(got) != "replaced" {
		t.Errorf("load after overwrite: %q %v", got, err)
	}
	if err := b.Delete(ctx, "certificates/ca"); err != nil {
		t.Fatal(err)
	}
	if got, err := a.List(ctx, "certificates", true); err != nil || !slices.Equal(got, []string{"certificates/ca0", "certificates/ca0/x.crt"}) {
		t.Errorf("after deleting certificates/ca: %q %v, want only certificates/ca0 left", got, err)
	}
	if a.Exists(ctx, "certificates/ca/demo.test/demo.test.crt") {
		t.Error("a file under a deleted directory still exists")
	}
}

// TestStorageLockExclusive checks that one lock name has one holder across
// gateways, and that a waiter is woken by the release's announcement (its
// poll is an hour long, so nothing else could wake it).
func TestStorageLockExclusive(t *testing.T) {
	a, b, _, _ := fleet(t, time.Minute, time.Hour)
	ctx := context.Background()
	if err := a.Lock(ctx, "issue_cert_demo.test"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*certstore.Storage{a, b} {
		if ok, err := s.TryLock(ctx, "issue_cert_demo.test"); ok || err != nil {
			t.Fatalf("try lock while held: %v %v, want false", ok, err)
		}
	}
	if ok, err := b.TryLock(ctx, "issue_cert_other.test"); !ok || err != nil {
		t.Fatalf("try another name: %v %v, want true", ok, err)
	}
	got := make(chan error, 1)
	go func() { got <- b.Lock(ctx, "issue_cert_demo.test") }()
	if err := a.Unlock(ctx, "issue_cert_demo.test"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the waiter was not woken by the release")
	}
	if err := a.Unlock(ctx, "issue_cert_demo.test"); err == nil {
		t.Error("unlock of a lock this gateway does not hold: no error")
	}
	for _, name := range []string{"issue_cert_demo.test", "issue_cert_other.test"} {
		if err := b.Unlock(ctx, name); err != nil {
			t.Errorf("unlock %s: %v", name, err)
		}
	}
}

// TestStorageLockContext checks that a waiter gives up when its context
// ends.
func TestStorageLockContext(t *testing.T) {
	a, b, _, _ := fleet(t, time.Minute, time.Hour)
	if err := a.Lock(context.Background(), "n"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	go func() { got <- b.Lock(ctx, "n") }()
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("lock with a cancelled context: %v, want context.Canceled", err)
	}
}

// counting is a backend that counts renewals and can stop answering
// them, as a gateway that froze or lost its network would.
type counting struct {
	*redis.Store
	renewed chan struct{}
	frozen  atomic.Bool
}

func (c *counting) Renew(ctx context.Context, l registry.Lease, ttl time.Duration) (registry.Lease, error) {
	if c.frozen.Load() {
		return registry.Lease{}, fmt.Errorf("frozen: %w", registry.ErrUnavailable)
	}
	l, err := c.Store.Renew(ctx, l, ttl)
	if err == nil {
		select {
		case c.renewed <- struct{}{}:
		default:
		}
	}
	return l, err
}

// TestStorageLockRenewedAndExpires checks the lease: a live holder keeps
// the lock across many TTLs by its renewals; a holder that stops renewing
// (it died) loses it once the TTL runs out, a waiter takes it, and the old
// holder's unlock reports the loss.
func TestStorageLockRenewedAndExpires(t *testing.T) {
	const ttl = 300 * time.Millisecond
	srv := registrytest.StartRedis(t)
	ca := &counting{Store: openRedis(t, srv, "renew"), renewed: make(chan struct{})}
	a := newStorage(t, ca, "gw-a", ttl, 50*time.Millisecond)
	b := newStorage(t, openRedis(t, srv, "renew"), "gw-b", ttl, 50*time.Millisecond)
	ctx := context.Background()
	if err := a.Lock(ctx, "n"); err != nil {
		t.Fatal(err)
	}
	// Five renewals, a third of the TTL apart: the first lease has run out
	// well before the last, and the lock is still a's.
	for range 5 {
		<-ca.renewed
	}
	if ok, err := b.TryLock(ctx, "n"); ok || err != nil {
		t.Fatalf("try lock held past its first TTL by renewals: %v %v, want false", ok, err)
	}
	if err := a.RenewLockLease(ctx, "n", 30*24*time.Hour); err != nil {
		t.Fatalf("renew lock lease: %v", err)
	}
	ca.frozen.Store(true)
	if err := b.Lock(ctx, "n"); err != nil {
		t.Fatalf("lock after the holder stopped renewing: %v", err)
	}
	if err := a.Unlock(ctx, "n"); !errors.Is(err, registry.ErrLeaseLost) {
		t.Errorf("unlock by the holder whose lease ran out: %v, want ErrLeaseLost", err)
	}
	if err := b.Unlock(ctx, "n"); err != nil {
		t.Error(err)
	}
}

// TestStorageCloseReleases checks that a closed storage releases its
// locks at once and takes no more.
func TestStorageCloseReleases(t *testing.T) {
	a, b, _, _ := fleet(t, time.Hour, time.Hour)
	ctx := context.Background()
	for _, n := range []string{"x", "y"} {
		if err := a.Lock(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"x", "y"} {
		if ok, err := b.TryLock(ctx, n); !ok || err != nil {
			t.Errorf("try lock %s after its holder closed: %v %v, want true", n, ok, err)
		}
	}
	if err := a.Lock(ctx, "z"); err == nil {
		t.Error("lock on a closed storage: no error")
	}
	if err := a.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
}
