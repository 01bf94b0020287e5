package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/registry"
)

// The Redis store keeps blobs in three keys under its hash tag: values in
// one hash, write times (milliseconds) in another, and every key in a
// sorted set with score 0, whose lexicographic ranges list a "directory"
// in one command. The scripts keep the three in step.

// blobPutScript writes one blob.
// KEYS: values hash, times hash, keys sorted set. ARGV: key, value, now.
var blobPutScript = goredis.NewScript(luaNow + `
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], string.format('%d', now(ARGV[3])))
redis.call('ZADD', KEYS[3], 0, ARGV[1])
return 'ok'
`)

// blobDeleteScript deletes a blob and every blob under it.
// KEYS: values hash, times hash, keys sorted set. ARGV: key, lex min and
// lex max of the keys under it.
// Reply: the number of blobs deleted.
var blobDeleteScript = goredis.NewScript(`
local gone = {ARGV[1]}
for _, k in ipairs(redis.call('ZRANGEBYLEX', KEYS[3], ARGV[2], ARGV[3])) do table.insert(gone, k) end
local n = 0
for _, k in ipairs(gone) do
  n = n + redis.call('HDEL', KEYS[1], k)
  redis.call('HDEL', KEYS[2], k)
  redis.call('ZREM', KEYS[3], k)
end
return n
`)

// blobRange returns the lexicographic bounds of the keys under prefix:
// from prefix+"/" included to prefix+"0" excluded ('0' follows '/').
func blobRange(prefix string) (lo, hi string) {
	if prefix == "" {
		return "-", "+"
	}
	return "[" + prefix + "/", "(" + prefix + "0"
}

// checkBlobKey refuses an empty key.
func checkBlobKey(key string) error {
	if key == "" || strings.HasPrefix(key, "/") || strings.HasSuffix(key, "/") {
		return fmt.Errorf("blob key %q: want components separated by '/', none empty at either end", key)
	}
	return nil
}

// PutBlob stores value at key (see registry.Blobs).
func (r *Store) PutBlob(ctx context.Context, key string, value []byte) error {
	if err := checkBlobKey(key); err != nil {
		return fmt.Errorf("registry: put blob: %w", err)
	}
	err := blobPutScript.Run(ctx, r.c, []string{r.keys.blobs, r.keys.blobTimes, r.keys.blobKeys},
		key, value, r.nowArg()).Err()
	if err != nil {
		return fmt.Errorf("registry: put blob %s: %w", key, r.fail(ctx, err))
	}
	return nil
}

// GetBlob returns the value at key (see registry.Blobs).
func (r *Store) GetBlob(ctx context.Context, key string) ([]byte, error) {
	v, err := r.c.HGet(ctx, r.keys.blobs, key).Bytes()
	switch {
	case errors.Is(err, goredis.Nil):
		return nil, fmt.Errorf("registry: get blob %s: %w", key, registry.ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("registry: get blob %s: %w", key, r.fail(ctx, err))
	}
	return v, nil
}

// DeleteBlobs removes key and every key under it (see registry.Blobs).
func (r *Store) DeleteBlobs(ctx context.Context, key string) error {
	if err := checkBlobKey(key); err != nil {
		return fmt.Errorf("registry: delete blobs: %w", err)
	}
	lo, hi := blobRange(key)
	err := blobDeleteScript.Run(ctx, r.c, []string{r.keys.blobs, r.keys.blobTimes, r.keys.blobKeys}, key, lo, hi).Err()
	if err != nil {
		return fmt.Errorf("registry: delete blobs %s: %w", key, r.fail(ctx, err))
	}
	return nil
}

// BlobsUnder returns every key under prefix (see registry.Blobs).
func (r *Store) BlobsUnder(ctx context.Context, prefix string) ([]string, error) {
	lo, hi := blobRange(prefix)
	keys, err := r.c.ZRangeByLex(ctx, r.keys.blobKeys, &goredis.ZRangeBy{Min: lo, Max: hi}).Result()
	if err != nil {
		return nil, fmt.Errorf("registry: list blobs under %q: %w", prefix, r.fail(ctx, err))
	}
	return keys, nil
}

// StatBlob returns the size and write time of the value at key (see
// registry.Blobs).
func (r *Store) StatBlob(ctx context.Context, key string) (registry.BlobInfo, error) {
	var size *goredis.IntCmd
	var at *goredis.StringCmd
	_, err := r.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		size = p.HStrLen(ctx, r.keys.blobs, key)
		at = p.HGet(ctx, r.keys.blobTimes, key)
		return nil
	})
	if err != nil && !errors.Is(err, goredis.Nil) {
		return registry.BlobInfo{}, fmt.Errorf("registry: stat blob %s: %w", key, r.fail(ctx, err))
	}
	ms, perr := strconv.ParseInt(at.Val(), 10, 64)
	if size.Val() == 0 && at.Err() != nil {
		return registry.BlobInfo{}, fmt.Errorf("registry: stat blob %s: %w", key, registry.ErrNotFound)
	}
	if perr != nil {
		return registry.BlobInfo{}, fmt.Errorf("registry: stat blob %s: stored write time %q: %w", key, at.Val(), perr)
	}
	return registry.BlobInfo{Size: size.Val(), Modified: time.UnixMilli(ms).UTC()}, nil
}

var _ registry.Blobs = (*Store)(nil)
