package bolt

import (
	"fmt"
	"os"
	"strconv"

	bbolt "go.etcd.io/bbolt"
)

// A bbolt store records the version of its format (the buckets and the
// shape of their records) under meta/schema, a decimal number:
//
//	0  no meta bucket: written before versions were recorded; the records
//	   are those of version 1.
//	1  homes, apps, appstates, claims, target, locks, lockseq, sessions and
//	   meta, records as JSON (testdata/bolt-v1.db is one).
//
// At open, a file of an older version is copied whole next to itself
// (state.db.v0.bak: bbolt's Tx.WriteTo, synced) and then migrated forward
// in one transaction; a file of a newer version is refused naming both,
// and left as it is: a newer wakegate may store what this one would
// misread. A change of any bucket or record shape raises Schema and
// adds its migration step to migrateBolt; TestBoltFixtures fails until
// it does.

// Schema is the version of the bbolt format this wakegate writes.
const Schema = 1

var (
	bucketMeta = []byte("meta")   // the store's own keys
	keySchema  = []byte("schema") // meta: the format version, decimal
	keyProbe   = []byte("probe")  // meta: the time of the last probe write (health.go)
)

// ProblemNewer: the file was written by a newer wakegate.
const ProblemNewer OpenProblem = "of a newer format"

// schemaOf reads the format version of the store in tx: 0 when it has
// none.
func schemaOf(tx *bbolt.Tx) (int, error) {
	bk := tx.Bucket(bucketMeta)
	if bk == nil {
		return 0, nil
	}
	raw := bk.Get(keySchema)
	if raw == nil {
		return 0, nil
	}
	v, err := strconv.Atoi(string(raw))
	if err != nil || v < 1 {
		return 0, fmt.Errorf("meta/schema: %q is not a format version", raw)
	}
	return v, nil
}

// checkSchema reads the version of the opened, read-only db and refuses
// one newer than Schema; it returns the version found.
func checkSchema(path string, db *bbolt.DB) (int, error) {
	var v int
	err := guardBolt(func() error {
		return db.View(func(tx *bbolt.Tx) error {
			var err error
			v, err = schemaOf(tx)
			return err
		})
	})
	if err != nil {
		return 0, &OpenError{Path: path, Problem: ProblemBadRecord, Records: []string{"meta/schema"}, Err: err}
	}
	if v > Schema {
		return v, &OpenError{Path: path, Problem: ProblemNewer,
			Err: fmt.Errorf("it has format version %d; this wakegate reads and writes version %d", v, Schema)}
	}
	return v, nil
}

// backupBeforeMigration copies the store at path, of format version from,
// to path.v{from}.bak (through a temp file, synced, renamed) and returns
// that name. An existing copy of an earlier attempt is replaced: the file
// it was made from is still unmigrated.
func backupBeforeMigration(path string, db *bbolt.DB, from int) (string, error) {
	dst := fmt.Sprintf("%s.v%d.bak", path, from)
	_, err := WriteFileAtomic(dst, copyOf(db))
	if err != nil {
		_ = os.Remove(dst)
		return "", fmt.Errorf("back up before migrating from format version %d: %w", from, err)
	}
	return dst, nil
}

// migrateBolt brings the store in tx from format version from to
// Schema, one step at a time, and records the version.
func migrateBolt(tx *bbolt.Tx, from int) error {
	bk, err := tx.CreateBucketIfNotExists(bucketMeta)
	if err != nil {
		return fmt.Errorf("create bucket meta: %w", err)
	}
	// Each step from v to v+1 goes here, in order, while v < from's
	// target. From 0 to 1 there is none: version 1 is version 0 with its
	// version recorded.
	_ = from
	return bk.Put(keySchema, []byte(strconv.Itoa(Schema)))
}

// Migrated says what Open did to bring an older file forward: the
// version it had and where its copy was written; From is Schema when
// nothing was done.
type Migrated struct {
	From   int
	Backup string
}

// Migration reports the migration Open made, if any.
func (b *Store) Migration() Migrated { return b.migrated }
