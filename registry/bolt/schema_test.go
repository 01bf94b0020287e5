package bolt_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/bolt"
)

// The fixtures under testdata are stores as wakegate wrote them:
// bolt-v0.db by a gateway from before format versions were recorded (a
// config home cfg, a home dyn and an app files registered through the
// admin API, the roll target 2), bolt-v1.db the same after its migration.
// A change of the format that this wakegate cannot read, or that writes
// records differently without a new BoltSchema, fails here.

// fixtureCopy copies testdata/name to a temp state.db and returns its path
// and the fixture's bytes.
func fixtureCopy(t *testing.T, name string) (string, []byte) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "state.db")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, raw
}

// wantFixtureRecords checks that b holds the fixtures' records.
func wantFixtureRecords(t *testing.T, b *bolt.Store) {
	t.Helper()
	ctx := context.Background()
	hs, err := b.ListHomes(ctx)
	if err != nil || len(hs) != 2 {
		t.Fatalf("homes %+v, %v", hs, err)
	}
	cfg, dyn := hs[0], hs[1]
	if cfg.ID != "cfg" || cfg.Target != "cfg" || cfg.Provider != "exec" || cfg.Dynamic || cfg.Generation != 1 {
		t.Fatalf("home cfg: %+v", cfg)
	}
	if dyn.ID != "dyn" || dyn.Target != "dt" || !dyn.Dynamic || dyn.IdleTimeout != 90*time.Second ||
		!slices.Contains(dyn.Settings.Command, "http.server") {
		t.Fatalf("home dyn: %+v", dyn)
	}
	apps, err := b.ListApps(ctx)
	if err != nil || len(apps) != 1 || apps[0].Slug != "files" || apps[0].Upstream != "http://127.0.0.1:9" {
		t.Fatalf("apps %+v, %v", apps, err)
	}
	tg, err := b.GetTarget(ctx)
	if err != nil || tg.Version != "2" {
		t.Fatalf("target %+v, %v", tg, err)
	}
	if c, err := b.GetClaim(ctx, "dt"); err != nil || c.Home != "dyn" {
		t.Fatalf("claim dt %+v, %v", c, err)
	}
}

func TestBoltFixtureV0IsMigratedAfterABackup(t *testing.T) {
	path, _ := fixtureCopy(t, "bolt-v0.db")
	b, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Close() }()
	m := b.Migration()
	if m.From != 0 || m.Backup != path+".v0.bak" {
		t.Fatalf("migration %+v, want from 0 with a backup at %s.v0.bak", m, path)
	}
	wantFixtureRecords(t, b)
	// The backup is the store as it was: sound, the same records, no
	// version.
	r, err := bolt.Check(m.Backup)
	if err != nil || len(r.Problems) > 0 || r.Records["homes"] != 2 {
		t.Fatalf("backup check %+v, %v", r, err)
	}
	if _, ok := r.Records["meta"]; ok {
		t.Fatalf("the backup was migrated too: %+v", r.Records)
	}
}

func TestBoltFixtureV1ReadsAndWritesTheSameRecords(t *testing.T) {
	path, _ := fixtureCopy(t, "bolt-v1.db")
	b, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m := b.Migration(); m.From != bolt.Schema || m.Backup != "" {
		t.Fatalf("a current store was migrated: %+v", m)
	}
	wantFixtureRecords(t, b)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// Every record, decoded and encoded again by this wakegate, is the
	// bytes stored: a change of the record format must raise BoltSchema
	// (and bring a fixture of its own).
	db, err := bbolt.Open(filepath.Join("testdata", "bolt-v1.db"), 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	encode := map[string]func([]byte) (any, error){
		"homes":  func(raw []byte) (any, error) { var v registry.Home; err := json.Unmarshal(raw, &v); return v, err },
		"apps":   func(raw []byte) (any, error) { var v registry.App; err := json.Unmarshal(raw, &v); return v, err },
		"claims": func(raw []byte) (any, error) { var v registry.Claim; err := json.Unmarshal(raw, &v); return v, err },
		"target": func(raw []byte) (any, error) { var v registry.Target; err := json.Unmarshal(raw, &v); return v, err },
	}
	n := 0
	err = db.View(func(tx *bbolt.Tx) error {
		for bucket, decode := range encode {
			err := tx.Bucket([]byte(bucket)).ForEach(func(k, raw []byte) error {
				v, err := decode(raw)
				if err != nil {
					return err
				}
				again, err := json.Marshal(v)
				if err != nil {
					return err
				}
				if !bytes.Equal(again, raw) {
					t.Errorf("%s/%s is written differently now:\nstored %s\nnow    %s", bucket, k, raw, again)
				}
				n++
				return nil
			})
			if err != nil {
				return err
			}
		}
		if v := tx.Bucket([]byte("meta")).Get([]byte("schema")); string(v) != "1" {
			t.Errorf("meta/schema = %q, want 1", v)
		}
		return nil
	})
	if err != nil || n != 6 {
		t.Fatalf("read %d records: %v", n, err)
	}
}

func TestBoltNewerFormatIsRefused(t *testing.T) {
	path, _ := fixtureCopy(t, "bolt-v1.db")
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error { return tx.Bucket([]byte("meta")).Put([]byte("schema"), []byte("2")) })
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	_, err = bolt.Open(path, bolt.Options{})
	var oe *bolt.OpenError
	if !errors.As(err, &oe) || oe.Problem != bolt.ProblemNewer ||
		!strings.Contains(err.Error(), "format version 2") || !strings.Contains(err.Error(), "version 1") || oe.Hint() == "" {
		t.Fatalf("open of a newer store: %v; want it refused naming versions 2 and 1", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("the refused store changed")
	}
}
