package sysfile

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadAgreesWithOS reads files of the kernel and of the disk, below
// and above the first read's buffer, with Read and with os.ReadFile.
func TestReadAgreesWithOS(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small")
	big := filepath.Join(dir, "big")
	empty := filepath.Join(dir, "empty")
	for p, n := range map[string]int{small: 100, big: 3*firstRead + 7, empty: 0} {
		if err := os.WriteFile(p, bytes.Repeat([]byte("x"), n), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{small, big, empty, "/proc/self/mountinfo", "/proc/self/status"} {
		got, err := Read(p)
		if err != nil {
			t.Fatalf("Read(%s): %v", p, err)
		}
		want, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		// The kernel's files may change between the reads: compare their
		// first line only, which names this process's first mount or its
		// name.
		if strings.HasPrefix(p, "/proc/") {
			got, want = firstLine(got), firstLine(want)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("Read(%s) = %d bytes %q..., os.ReadFile %d bytes", p, len(got), head(got), len(want))
		}
	}
}

// TestErrorsAsOS: a missing file is fs.ErrNotExist, with its path, for
// both calls; a write under a missing folder too.
func TestErrorsAsOS(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope", "file")
	if _, err := Read(missing); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("Read of a missing file: %v, want ErrNotExist naming it", err)
	}
	if err := Write(missing, []byte("1")); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("Write under a missing folder: %v, want ErrNotExist naming it", err)
	}
}

// TestWriteReplaces: Write creates a file as os.WriteFile with mode 0
// would, and replaces what was there.
func TestWriteReplaces(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("a longer content"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Write(p, []byte("42")); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(p)
	if err != nil || string(got) != "42" {
		t.Fatalf("after Write: %q, %v; want \"42\"", got, err)
	}
	fresh := filepath.Join(filepath.Dir(p), "fresh")
	if err := Write(fresh, []byte("x")); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(fresh)
	if err != nil || st.Mode().Perm() != 0 {
		t.Fatalf("a file Write made: %v, %v; want mode 0, as os.WriteFile(..., 0)", st.Mode(), err)
	}
}

// TestWriteFileModeAsOS: a file WriteFile makes has the mode
// os.WriteFile gives it with the same perm (the umask applied), and a
// file already there keeps its own.
func TestWriteFileModeAsOS(t *testing.T) {
	dir := t.TempDir()
	for _, perm := range []os.FileMode{0o600, 0o644, 0o640} {
		mine, theirs := filepath.Join(dir, "mine"+perm.String()), filepath.Join(dir, "os"+perm.String())
		if err := WriteFile(mine, []byte("record"), uint32(perm)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(theirs, []byte("record"), perm); err != nil {
			t.Fatal(err)
		}
		a, errA := os.Stat(mine)
		b, errB := os.Stat(theirs)
		if errA != nil || errB != nil || a.Mode() != b.Mode() || a.Size() != b.Size() {
			t.Errorf("perm %v: WriteFile made %v (%v), os.WriteFile %v (%v)", perm, a, errA, b, errB)
		}
	}
	kept := filepath.Join(dir, "kept")
	if err := os.WriteFile(kept, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(kept, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(kept); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("a file WriteFile replaced: %v, %v; want its own mode 0600 kept", st.Mode(), err)
	}
}

func firstLine(b []byte) []byte {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i]
	}
	return b
}

func head(b []byte) []byte { return b[:min(len(b), 40)] }
