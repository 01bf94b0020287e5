package registry_test

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
	"github.com/wakegate/wakegate/registry/registrytest"
)

// seedBolt writes a store with a few homes at path and closes it,
// returning its bytes.
func seedBolt(t *testing.T, path string) []byte {
	t.Helper()
	b, err := registry.OpenBolt(path, registry.BoltOptions{})
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
		want    registry.OpenProblem
	}{
		{"garbage", func([]byte) []byte { return garbage }, "", registry.ProblemDamaged},
		{"truncated in half", func(s []byte) []byte { return s[:len(s)/2] }, "", registry.ProblemDamaged},
		{"meta pages only", func(s []byte) []byte { return s[:8192] }, "", registry.ProblemDamaged},
		{"one page", func(s []byte) []byte { return s[:4096] }, "", registry.ProblemDamaged},
		{"a zeroed meta page and garbage", func(s []byte) []byte {
			c := bytes.Clone(s)
			copy(c[4096:], garbage[:len(c)-4096])
			clear(c[:4096])
			return c
		}, "", registry.ProblemDamaged},
		{"empty, data expected", func([]byte) []byte { return []byte{} }, "homes exist", registry.ProblemEmpty},
		{"missing, data expected", func([]byte) []byte { return nil }, "homes exist", registry.ProblemMissing},
		{"damaged, data expected", func([]byte) []byte { return garbage }, "homes exist", registry.ProblemDamaged},
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
			b, err := registry.OpenBolt(path, registry.BoltOptions{MustHoldData: tc.must})
			if err == nil {
				_ = b.Close()
				t.Fatal("opened")
			}
			var oe *registry.OpenError
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

func TestOpenBoltEmptyOrMissingBecomesNewStore(t *testing.T) {
	for _, empty := range []bool{true, false} {
		path := filepath.Join(t.TempDir(), "state.db")
		if empty {
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		b, err := registry.OpenBolt(path, registry.BoltOptions{})
		if err != nil {
			t.Fatalf("empty=%v: %v", empty, err)
		}
		if hs, err := b.ListHomes(context.Background()); err != nil || len(hs) != 0 {
			t.Fatalf("empty=%v: homes %v, %v", empty, hs, err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestOpenBoltDirectoryInPlaceIsNotDamage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := registry.OpenBolt(path, registry.BoltOptions{})
	var oe *registry.OpenError
	if err == nil || errors.As(err, &oe) || !strings.Contains(err.Error(), path) {
		t.Fatalf("open of a directory: %v; want a plain error naming %s", err, path)
	}
}
