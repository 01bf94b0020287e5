package control

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/bolt"
	"github.com/wakegate/wakegate/registry/registrytest"
)

// TestOpenStoreRefusesUntrusted walks rule 30's store side on real files:
// a store that is missing while data_dir holds home folders, or emptied,
// is refused and left as it is; --reset-store moves a refused file aside
// (naming it in the log) and starts a new store; a sound store opens as it
// is, with or without --reset-store.
func TestOpenStoreRefusesUntrusted(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	dir := t.TempDir()
	path := filepath.Join(dir, StoreFile)
	if err := os.MkdirAll(filepath.Join(dir, "homes", "h1"), 0o755); err != nil {
		t.Fatal(err)
	}
	problem := func(err error) bolt.OpenProblem {
		var oe *bolt.OpenError
		if !errors.As(err, &oe) {
			t.Fatalf("not an OpenError: %v", err)
		}
		return oe.Problem
	}

	// Missing while homes/h1 exists: refused, and no file is made.
	if b, err := OpenStore(dir, false, log); err == nil {
		_ = b.Close()
		t.Fatal("a missing store beside home folders was opened")
	} else if p := problem(err); p != bolt.ProblemMissing {
		t.Fatalf("missing store: problem %q", p)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refusal made a file: %v", err)
	}

	// Emptied: refused and left as it is.
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := OpenStore(dir, false, log); err == nil {
		_ = b.Close()
		t.Fatal("an empty store was opened")
	} else if p := problem(err); p != bolt.ProblemEmpty {
		t.Fatalf("empty store: problem %q", p)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
		t.Fatalf("the refused file was touched: %v, %v", fi, err)
	}

	// --reset-store: moved aside, and a new store takes writes.
	b, err := OpenStore(dir, true, log)
	if err != nil {
		t.Fatalf("--reset-store: %v", err)
	}
	aside, _ := filepath.Glob(path + ".refused-*")
	if len(aside) != 1 || !strings.Contains(logs.String(), "moved_to="+aside[0]) {
		t.Fatalf("refused file not moved aside and named: %v; log:\n%s", aside, logs.String())
	}
	ctx := context.Background()
	if _, err := b.PutHome(ctx, registrytest.SampleHome("h1"), registry.Cond{}); err != nil {
		t.Fatalf("write to the new store: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	// A sound store opens with what it holds, --reset-store or not.
	for _, reset := range []bool{false, true} {
		b, err := OpenStore(dir, reset, log)
		if err != nil {
			t.Fatalf("sound store (reset %v): %v", reset, err)
		}
		homes, err := b.ListHomes(ctx)
		_ = b.Close()
		if err != nil || len(homes) != 1 {
			t.Fatalf("sound store (reset %v): homes %v, %v", reset, homes, err)
		}
	}
	if again, _ := filepath.Glob(path + ".refused-*"); len(again) != 1 {
		t.Fatalf("a sound store was moved aside: %v", again)
	}
}

// TestBackupHandlerCopiesTheStore fetches the online backup over a
// loopback server and opens the copy: it holds what the store held, and
// its length is the Content-Length announced.
func TestBackupHandlerCopiesTheStore(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	dir := t.TempDir()
	b, err := OpenStore(dir, false, log)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Close() }()
	ctx := context.Background()
	if _, err := b.PutHome(ctx, registrytest.SampleHome("h1"), registry.Cond{}); err != nil {
		t.Fatal(err)
	}
	h := BackupHandler(b, log)
	if h == nil {
		t.Fatal("no backup handler for the embedded store")
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("backup: %d, %v", resp.StatusCode, err)
	}
	if cl := resp.Header.Get("Content-Length"); cl != strconv.Itoa(len(body)) {
		t.Fatalf("Content-Length %q, body %d bytes", cl, len(body))
	}
	cdir := t.TempDir()
	if err := os.WriteFile(filepath.Join(cdir, StoreFile), body, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := OpenStore(cdir, false, log)
	if err != nil {
		t.Fatalf("open the copy: %v", err)
	}
	defer func() { _ = c.Close() }()
	if _, err := c.GetHome(ctx, "h1"); err != nil {
		t.Fatalf("the copy lacks the home: %v", err)
	}
}
