// Package certstore is a certmagic.Storage over wakegate's shared store,
// so that every gateway of a fleet shares one set of certificates, keys
// and ACME accounts and obtains each certificate once.
//
// Values are the store's blobs (registry.Blobs): slash-separated keys with
// implied directories, as certmagic expects. Certmagic's locks are the
// store's leases (registry's Lock, Renew, Unlock): a lock is taken with a
// TTL, kept alive by a renewal every third of the TTL for as long as its
// holder lives, and released by Unlock; a holder that dies frees the name
// when its lease runs out. A waiter wakes on the store's announcement of
// the release (Notifier), with a bounded poll for a lease that merely
// expired.
package certstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"

	"github.com/wakegate/wakegate/registry"
)

// Backend is what the storage needs of a store: blobs, leases and change
// announcements. *redis.Store is one.
type Backend interface {
	registry.Blobs
	registry.Notifier
	// Lock, Renew and Unlock are registry.Store's leases.
	Lock(ctx context.Context, name, holder string, ttl time.Duration) (registry.Lease, error)
	Renew(ctx context.Context, l registry.Lease, ttl time.Duration) (registry.Lease, error)
	Unlock(ctx context.Context, l registry.Lease) error
}

// Options configure a Storage.
type Options struct {
	// Holder names this gateway in its leases (its instance name); a
	// random suffix tells two storages of one name apart. Required.
	Holder string
	// Prefix is the first component of every blob key and lock name, so
	// certificates sit apart from anything else in the store. Default
	// "tls".
	Prefix string
	// LockTTL is a lock's lease: how long a holder that died keeps the
	// name from others. A live holder renews every LockTTL/3. Default
	// 30s; zero means the default.
	LockTTL time.Duration
	// Poll bounds the wait between two attempts at a held lock when no
	// release is announced (a lease that ran out is not). Default 1s;
	// zero means the default.
	Poll time.Duration
	// Log receives lease trouble (a renewal that failed, a lease lost).
	// Default slog.Default().
	Log *slog.Logger
}

// Storage is a certmagic.Storage, TryLocker and LockLeaseRenewer over a
// Backend. Close it to stop the renewals and release its locks.
type Storage struct {
	b      Backend
	holder string
	prefix string
	ttl    time.Duration
	poll   time.Duration
	log    *slog.Logger

	mu     sync.Mutex
	held   map[string]*heldLock
	closed bool
}

// heldLock is a lock this storage holds and keeps alive.
type heldLock struct {
	mu    sync.Mutex
	lease registry.Lease
	stop  chan struct{} // closed by Unlock or Close
	done  chan struct{} // closed when the renewal ends
}

func (h *heldLock) get() registry.Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lease
}

func (h *heldLock) set(l registry.Lease) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lease = l
}

// New returns a storage over b.
func New(b Backend, o Options) (*Storage, error) {
	if o.Holder == "" {
		return nil, errors.New("certstore: a holder name is required")
	}
	if o.Prefix == "" {
		o.Prefix = "tls"
	}
	if o.LockTTL <= 0 {
		o.LockTTL = 30 * time.Second
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	var nonce [4]byte
	_, _ = rand.Read(nonce[:])
	return &Storage{
		b: b, holder: o.Holder + "/" + hex.EncodeToString(nonce[:]), prefix: strings.Trim(o.Prefix, "/"),
		ttl: o.LockTTL, poll: o.Poll, log: o.Log, held: map[string]*heldLock{},
	}, nil
}

// String names the storage in certmagic's messages.
func (s *Storage) String() string { return "wakegate shared store (" + s.prefix + "/)" }

// blobKey is the store's key of a certmagic key.
func (s *Storage) blobKey(key string) string {
	key = strings.Trim(key, "/")
	if key == "" {
		return s.prefix
	}
	return s.prefix + "/" + key
}

// lockName is the store's lock name of a certmagic lock.
func (s *Storage) lockName(name string) string { return s.prefix + "-lock/" + name }

// notExist turns the store's not-found into fs.ErrNotExist, which
// certmagic tests for.
func notExist(err error) error {
	if errors.Is(err, registry.ErrNotFound) {
		return fmt.Errorf("%w: %w", fs.ErrNotExist, err)
	}
	return err
}

// Store puts value at key, replacing what was there.
func (s *Storage) Store(ctx context.Context, key string, value []byte) error {
	if err := s.b.PutBlob(ctx, s.blobKey(key), value); err != nil {
		return fmt.Errorf("certstore: store %s: %w", key, err)
	}
	return nil
}

// Load returns the value at key; fs.ErrNotExist when there is none.
func (s *Storage) Load(ctx context.Context, key string) ([]byte, error) {
	v, err := s.b.GetBlob(ctx, s.blobKey(key))
	if err != nil {
		return nil, fmt.Errorf("certstore: load %s: %w", key, notExist(err))
	}
	return v, nil
}

// Delete removes key and, when key is a directory, every key under it.
// A missing key is not an error.
func (s *Storage) Delete(ctx context.Context, key string) error {
	if err := s.b.DeleteBlobs(ctx, s.blobKey(key)); err != nil {
		return fmt.Errorf("certstore: delete %s: %w", key, err)
	}
	return nil
}

// Exists reports whether key is a file or a directory (and the store
// answered).
func (s *Storage) Exists(ctx context.Context, key string) bool {
	_, err := s.Stat(ctx, key)
	return err == nil
}

// List returns the keys directly under dir (recursive false: files and
// directories one level down) or every key and directory below it
// (recursive true), as full keys; fs.ErrNotExist when dir holds nothing
// and is no file.
func (s *Storage) List(ctx context.Context, dir string, recursive bool) ([]string, error) {
	dir = strings.Trim(dir, "/")
	base := s.blobKey(dir)
	keys, err := s.b.BlobsUnder(ctx, base)
	if err != nil {
		return nil, fmt.Errorf("certstore: list %s: %w", dir, err)
	}
	if len(keys) == 0 {
		if _, err := s.b.StatBlob(ctx, base); err != nil {
			return nil, fmt.Errorf("certstore: list %s: %w", dir, notExist(err))
		}
		return nil, nil // a file has no entries
	}
	seen := map[string]bool{}
	var out []string
	add := func(rel string) {
		k := path.Join(dir, rel)
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	for _, k := range keys {
		rel := strings.TrimPrefix(k, base+"/")
		parts := strings.Split(rel, "/")
		if !recursive {
			add(parts[0])
			continue
		}
		for i := range parts {
			add(strings.Join(parts[:i+1], "/"))
		}
	}
	slices.Sort(out)
	return out, nil
}

// Stat describes key: a file with its size and write time, or a
// directory; fs.ErrNotExist when it is neither.
func (s *Storage) Stat(ctx context.Context, key string) (certmagic.KeyInfo, error) {
	key = strings.Trim(key, "/")
	bi, err := s.b.StatBlob(ctx, s.blobKey(key))
	if err == nil {
		return certmagic.KeyInfo{Key: key, Modified: bi.Modified, Size: bi.Size, IsTerminal: true}, nil
	}
	if !errors.Is(err, registry.ErrNotFound) {
		return certmagic.KeyInfo{}, fmt.Errorf("certstore: stat %s: %w", key, err)
	}
	under, lerr := s.b.BlobsUnder(ctx, s.blobKey(key))
	if lerr != nil {
		return certmagic.KeyInfo{}, fmt.Errorf("certstore: stat %s: %w", key, lerr)
	}
	if len(under) == 0 {
		return certmagic.KeyInfo{}, fmt.Errorf("certstore: stat %s: %w", key, notExist(err))
	}
	return certmagic.KeyInfo{Key: key, IsTerminal: false}, nil
}

var (
	_ certmagic.Storage          = (*Storage)(nil)
	_ certmagic.TryLocker        = (*Storage)(nil)
	_ certmagic.LockLeaseRenewer = (*Storage)(nil)
)
