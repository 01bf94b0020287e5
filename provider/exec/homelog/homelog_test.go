package homelog

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/fault"
)

func TestLogFileWriteRotatesAtCap(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "home.log")
	l := New(path, 100)
	lines := []string{}
	for i := 0; i < 12; i++ {
		line := strings.Repeat(string(rune('a'+i)), 29) + "\n" // 30 bytes
		lines = append(lines, line)
		if _, err := l.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{path, path + ".1"} {
			if fi, err := os.Stat(p); err == nil && fi.Size() > 100 {
				t.Fatalf("after line %d %s is %d bytes, cap 100", i, p, fi.Size())
			}
		}
	}
	cur, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(path + ".1")
	if err != nil {
		t.Fatal(err)
	}
	// 3 lines fit under the cap; 12 lines leave the last 3 in home.log and
	// the 3 before them in home.log.1.
	if string(cur) != strings.Join(lines[9:], "") {
		t.Fatalf("home.log = %q", cur)
	}
	if string(old) != strings.Join(lines[6:9], "") {
		t.Fatalf("home.log.1 = %q", old)
	}
	if got := l.Tail(2); got != strings.TrimSpace(lines[10])+" | "+strings.TrimSpace(lines[11]) {
		t.Fatalf("tail(2) = %q", got)
	}
	if got := l.Tail(4); !strings.HasPrefix(got, strings.TrimSpace(lines[8])+" | ") {
		t.Fatalf("tail(4) does not reach into home.log.1: %q", got)
	}
}

func TestLogFileRotateKeepsAppenderWriting(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "home.log")
	l := New(path, 1000)
	// The child's side: an O_APPEND descriptor held across the rotation.
	child, err := l.OpenAppend()
	if err != nil {
		t.Fatal(err)
	}
	defer child.Close()
	line := strings.Repeat("y", 63) + "\n"
	for i := 0; i < 40; i++ { // 2560 bytes, no cap check meanwhile
		if _, err := child.WriteString(line); err != nil {
			t.Fatal(err)
		}
	}
	if rotated, err := l.RotateIfFull(); err != nil || !rotated {
		t.Fatalf("RotateIfFull = %v, %v", rotated, err)
	}
	old, err := os.ReadFile(path + ".1")
	if err != nil {
		t.Fatal(err)
	}
	// The newest whole lines that fit in the cap.
	if len(old) != 960 || !bytes.HasPrefix(old, []byte(line)) {
		t.Fatalf("home.log.1 is %d bytes, want the last 15 whole lines (960)", len(old))
	}
	if _, err := child.WriteString("after\n"); err != nil {
		t.Fatal(err)
	}
	cur, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(cur) != "after\n" {
		t.Fatalf("home.log after rotation = %q, want the appender's line at offset 0", cur)
	}
	if rotated, err := l.RotateIfFull(); err != nil || rotated {
		t.Fatalf("RotateIfFull under the cap = %v, %v", rotated, err)
	}
}

func TestLogFileMissing(t *testing.T) {
	l := New(filepath.Join(t.TempDir(), "home.log"), 100)
	if got := l.Tail(3); got != "" {
		t.Fatalf("tail of a missing log = %q", got)
	}
	if rotated, err := l.RotateIfFull(); err != nil || rotated {
		t.Fatalf("RotateIfFull of a missing log = %v, %v", rotated, err)
	}
}

// TestTailLeavesOutProviderNotes checks that a failure reason quotes what
// the home wrote, not the provider's own lines in the same log.
func TestTailLeavesOutProviderNotes(t *testing.T) {
	l := New(filepath.Join(t.TempDir(), "home.log"), 1<<20)
	text := "2026-11-30T11:39:34Z wakegate: started pid 1 on port 2, version \"1\": /bin/sh -c exit 3\n" +
		"config file missing\n" +
		"2026-11-30T11:39:34Z wakegate: pid 1 exit status 3 unexpectedly; restarting\n" +
		"wakegate: a line of the home's own\n"
	if _, err := l.Write([]byte(text)); err != nil {
		t.Fatal(err)
	}
	if got, want := l.Tail(5), "config file missing | wakegate: a line of the home's own"; got != want {
		t.Fatalf("tail = %q, want %q", got, want)
	}
}

// TestTailSaysARepeatedLineOnce: a home that crashes the same way at each
// restart writes the same line each time; the reason quotes it once, with
// how many times it came in a row, and still reaches the lines before it.
func TestTailSaysARepeatedLineOnce(t *testing.T) {
	l := New(filepath.Join(t.TempDir(), "home.log"), 1<<20)
	text := "loading config\n" + strings.Repeat("error: port in use\n", 5)
	if _, err := l.Write([]byte(text)); err != nil {
		t.Fatal(err)
	}
	if got, want := l.Tail(5), "loading config | error: port in use (5 times)"; got != want {
		t.Fatalf("tail = %q, want %q", got, want)
	}
}

// The last log lines a failure reason quotes are escaped and bounded: a
// home's terminal escapes never reach the record or the operator's
// terminal as written.
func TestLogTailEscapesHomeText(t *testing.T) {
	l := New(filepath.Join(t.TempDir(), "home.log"), 1<<20)
	if _, err := l.Write([]byte("boom \x1b]0;owned\a\x1b[2J\n" + strings.Repeat("z", 500) + "\n")); err != nil {
		t.Fatal(err)
	}
	got := l.Tail(2)
	if strings.ContainsAny(got, "\x1b\a") || !strings.Contains(got, `boom \x1b]0;owned\a\x1b[2J`) {
		t.Errorf("tail = %q; want the escapes written as text", got)
	}
	if len(got) > 2*fault.ExcerptBytes+10 {
		t.Errorf("tail is %d bytes; want each line cut to %d", len(got), fault.ExcerptBytes)
	}
}
