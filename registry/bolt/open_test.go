package bolt_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/bolt"
	"github.com/wakegate/wakegate/registry/registrytest"
)

// seedBolt writes a store with a few homes at path and closes it,
// returning its bytes.
func seedBolt(t *testing.T, path string) []byte {
	t.Helper()
	b, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"h1", "h2", "h3"} {
		if _, err := b.PutHome(context.Background(), registrytest.SampleHome(id), registry.Cond{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestOpenBoltRefusesWhatItCannotTrust(t *testing.T) {
	garbage := make([]byte, 64<<10)
	_, _ = rand.Read(garbage)
	cases := []struct {
		name string
		// content is the file's bytes given a sound store's; nil removes it.
		content func(sound []byte) []byte
		must    string // BoltOptions.MustHoldData
		want    bolt.OpenProblem
	}{
		{"garbage", func([]byte) []byte { return garbage }, "", bolt.ProblemDamaged},
		{"truncated in half", func(s []byte) []byte { return s[:len(s)/2] }, "", bolt.ProblemDamaged},
		{"meta pages only", func(s []byte) []byte { return s[:8192] }, "", bolt.ProblemDamaged},
		{"one page", func(s []byte) []byte { return s[:4096] }, "", bolt.ProblemDamaged},
		{"a zeroed meta page and garbage", func(s []byte) []byte {
			c := bytes.Clone(s)
			copy(c[4096:], garbage[:len(c)-4096])
			clear(c[:4096])
			return c
		}, "", bolt.ProblemDamaged},
		{"empty", func([]byte) []byte { return []byte{} }, "", bolt.ProblemEmpty},
		{"empty, data expected", func([]byte) []byte { return []byte{} }, "homes exist", bolt.ProblemEmpty},
		{"one corrupted record byte", corruptRecord, "", bolt.ProblemBadRecord},
		{"missing, data expected", func([]byte) []byte { return nil }, "homes exist", bolt.ProblemMissing},
		{"damaged, data expected", func([]byte) []byte { return garbage }, "homes exist", bolt.ProblemDamaged},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			content := tc.content(seedBolt(t, path))
			if content == nil {
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(path, content, 0o600); err != nil {
				t.Fatal(err)
			}
			b, err := bolt.Open(path, bolt.Options{MustHoldData: tc.must})
			if err == nil {
				_ = b.Close()
				t.Fatal("opened")
			}
			var oe *bolt.OpenError
			if !errors.As(err, &oe) || oe.Problem != tc.want || oe.Path != path || oe.Hint() == "" {
				t.Fatalf("err %v (%#v), want %s naming %s", err, oe, tc.want, path)
			}
			after, rerr := os.ReadFile(path)
			if content == nil {
				if !errors.Is(rerr, os.ErrNotExist) {
					t.Fatalf("a missing store was created: %v", rerr)
				}
				return
			}
			if !bytes.Equal(after, content) {
				t.Fatalf("the refused file changed: %d bytes, was %d", len(after), len(content))
			}
		})
	}
}

// corruptRecord changes one byte of home h2's record (the opening brace
// of its JSON) in a sound store's bytes, every copy of it: bbolt keeps
// the pages of earlier versions until they are reused.
func corruptRecord(sound []byte) []byte {
	c := bytes.Clone(sound)
	needle := []byte(`{"id":"h2"`)
	for i := 0; ; {
		j := bytes.Index(c[i:], needle)
		if j < 0 {
			return c
		}
		c[i+j] = 'X'
		i += j + 1
	}
}

func TestOpenBoltMissingBecomesNewStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	b, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if hs, err := b.ListHomes(context.Background()); err != nil || len(hs) != 0 {
		t.Fatalf("homes %v, %v", hs, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestOpenBoltNamesTheBadRecordAndDropRepairs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	if err := os.WriteFile(path, corruptRecord(seedBolt(t, path)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := bolt.Open(path, bolt.Options{})
	var oe *bolt.OpenError
	if !errors.As(err, &oe) || oe.Problem != bolt.ProblemBadRecord || len(oe.Records) != 1 || oe.Records[0] != "homes/h2" {
		t.Fatalf("open: %v; want the record homes/h2 named", err)
	}
	if want := "wakegate store drop --file " + path + " homes/h2"; !strings.Contains(oe.Hint(), want) {
		t.Fatalf("hint %q lacks %q", oe.Hint(), want)
	}
	if err := bolt.DropRecords(path, []string{"homes/nope"}); err == nil {
		t.Fatal("dropped a record that does not exist")
	}
	if err := bolt.DropRecords(path, []string{"nobucket/h2"}); err == nil {
		t.Fatal("dropped from a bucket that is not the store's")
	}
	if err := bolt.DropRecords(path, []string{"homes/h2"}); err != nil {
		t.Fatal(err)
	}
	b, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatalf("open after the drop: %v", err)
	}
	defer func() { _ = b.Close() }()
	hs, err := b.ListHomes(context.Background())
	if err != nil || len(hs) != 2 || hs[0].ID != "h1" || hs[1].ID != "h3" {
		t.Fatalf("homes after the drop: %v, %v; want h1 and h3 kept", hs, err)
	}
}

func TestOpenBoltDirectoryInPlaceIsNotDamage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := bolt.Open(path, bolt.Options{})
	var oe *bolt.OpenError
	if err == nil || errors.As(err, &oe) || !strings.Contains(err.Error(), path) {
		t.Fatalf("open of a directory: %v; want a plain error naming %s", err, path)
	}
}
