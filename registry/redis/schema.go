package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	goredis "github.com/redis/go-redis/v9"
)

// A Redis store records the version of its format (its keys and the shape
// of their records) under {prefix}:schema, a decimal number, like the
// bbolt file's meta/schema (schema.go):
//
//	(none)  written before versions were recorded: the format of version 1.
//	1       the hashes homes, apps, appstates, claims and target, records
//	        as JSON, and the lease, session and blob keys beside them
//	        (testdata/redis-v1.json holds the records of one).
//
// A gateway that finds no version writes its own (SET NX: of several
// starting at once, one writes it). One that finds a newer version refuses
// to start, naming both: a newer wakegate may store what this one would
// misread. During a rolling deploy both versions share the server, so a
// format change that the previous version cannot read must come in two
// releases: first one that reads both shapes, then one that raises
// Schema and writes the new one.

// Schema is the version of the Redis format this wakegate writes.
const Schema = 1

// ErrNewerSchema means a store was written by a newer wakegate, in a
// format this one does not read.
var ErrNewerSchema = errors.New("registry: store of a newer format")

// checkSchema reads the server's format version, records this one's where
// there is none, and refuses a newer one.
func (r *Store) checkSchema(ctx context.Context) error {
	if _, err := r.c.SetNX(ctx, r.keys.schema, strconv.Itoa(Schema), 0).Result(); err != nil {
		return fmt.Errorf("registry: open redis store at %s: record the format version: %w", r.where(), r.fail(ctx, err))
	}
	raw, err := r.c.Get(ctx, r.keys.schema).Result()
	if errors.Is(err, goredis.Nil) {
		// Deleted between the two commands: nothing to refuse.
		return nil
	}
	if err != nil {
		return fmt.Errorf("registry: open redis store at %s: read the format version: %w", r.where(), r.fail(ctx, err))
	}
	v, err := strconv.Atoi(raw)
	if err != nil || v < 1 {
		return fmt.Errorf("registry: open redis store at %s: %s holds %q, not a format version: "+
			"set it to %d if this server holds a wakegate store of today's format", r.where(), r.keys.schema, raw, Schema)
	}
	if v > Schema {
		return fmt.Errorf("registry: open redis store at %s: %s says format version %d; this wakegate reads and writes version %d: "+
			"run a wakegate of version %d's format or newer (a rolling deploy goes forward, not back): %w",
			r.where(), r.keys.schema, v, Schema, v, ErrNewerSchema)
	}
	return nil
}
