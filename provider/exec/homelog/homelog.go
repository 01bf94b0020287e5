// Package homelog is the log of an exec home: the file its stdout and
// stderr append to, capped by rotation from the outside (the home must
// outlive a gateway restart, so no pipe runs through the gateway), with the
// provider's own notes between the home's lines, and the last lines quoted
// only as escaped excerpts.
//
// DESIGN rules that live here: 31's "nothing it prints can reach the
// operator's powers" for a home's output (Log.Tail quotes it escaped and
// bounded).
package homelog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/internal/sysfile"
)

// Log is a home's size-capped log, <homedir>/home.log, with one older
// generation kept in home.log.1.
//
// The home's stdout and stderr are the file itself (opened O_APPEND), not a
// pipe through the gateway: a pipe would break when the gateway restarts
// and kill the home with SIGPIPE on its next write, and the home must
// survive a gateway restart to be adopted. So the cap is enforced from the
// outside: RotateIfFull, called periodically and before each of the
// provider's own writes, copies the newest LogMaxBytes to home.log.1 and
// truncates home.log. Because the home appends, its next write lands at the
// new end of the file. The log may overshoot the cap by what the home
// writes between two checks, and lines written during the copy itself are
// lost; home.log.1 never exceeds the cap.
type Log struct {
	path string
	max  int64

	mu sync.Mutex // serialises rotation and the provider's own writes
}

// New returns the capped log at path; max must be positive.
func New(path string, max int64) *Log {
	return &Log{path: path, max: max}
}

// Path is where the log is; its older generation is Path()+".1".
func (l *Log) Path() string { return l.path }

// OpenAppend opens the log for a child's stdout and stderr, creating it 0600.
func (l *Log) OpenAppend() (*os.File, error) {
	// Not through os.OpenFile: the descriptor is the child's, which the
	// runtime's poller has no use for (sysfile).
	fd, err := sysfile.Open(l.path, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open log %s: %w", l.path, err)
	}
	return os.NewFile(uintptr(fd), l.path), nil
}

// Write appends p to the log, rotating first when p would take the log past
// its cap. It is the provider's own writer (start and exit notes); the
// home's output goes to the file directly.
func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	size, err := l.size()
	if err != nil {
		return 0, err
	}
	if size > 0 && size+int64(len(p)) > l.max {
		if err := l.rotateLocked(); err != nil {
			return 0, err
		}
	}
	f, err := l.OpenAppend()
	if err != nil {
		return 0, err
	}
	n, err := f.Write(p)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return n, fmt.Errorf("write log %s: %w", l.path, err)
	}
	return n, nil
}

// RotateIfFull rotates the log when it has reached its cap, and reports
// whether it did.
func (l *Log) RotateIfFull() (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	size, err := l.size()
	if err != nil || size < l.max {
		return false, err
	}
	if err := l.rotateLocked(); err != nil {
		return false, err
	}
	return true, nil
}

// size is the current size of home.log; a missing file is empty.
func (l *Log) size() (int64, error) {
	fi, err := os.Stat(l.path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("stat log: %w", err)
	}
	return fi.Size(), nil
}

// rotateLocked replaces home.log.1 with the newest l.max bytes of home.log
// (from the first whole line when that cuts a line) and truncates home.log.
func (l *Log) rotateLocked() error {
	data, cut, err := readTail(l.path, l.max)
	if err != nil {
		return err
	}
	if cut {
		if i := bytes.IndexByte(data, '\n'); i >= 0 && i+1 < len(data) {
			data = data[i+1:]
		}
	}
	old := l.path + ".1"
	tmp := old + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("rotate log: %w", err)
	}
	if err := os.Rename(tmp, old); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("rotate log: %w", err)
	}
	if err := os.Truncate(l.path, 0); err != nil {
		return fmt.Errorf("rotate log: truncate: %w", err)
	}
	return nil
}

// Tail returns up to n of the last non-empty lines the home wrote to the
// log (looking into home.log.1 when home.log has fewer; a line repeated in
// a row is one, with its count), joined by " | ",
// each an escaped excerpt of at most 200 bytes (fault.Excerpt): a short
// quote for a failure reason, which no terminal escape of the home's
// survives. The
// provider's own lines (isNote) are left out: they say what the provider
// did, which the reason says already. Errors give "".
func (l *Log) Tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	const window = 4096
	older, _, _ := readTail(l.path+".1", window)
	newer, _, _ := readTail(l.path, window)
	all := append(older, newer...)
	var lines []string
	for _, line := range strings.Split(string(all), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || isNote(line) {
			continue
		}
		lines = append(lines, fault.Excerpt(line)) // a home's text: escaped
	}
	// A line repeated in a row (a home that fails the same way at each
	// restart) is quoted once, with its count, and counts as one of n.
	var runs []string
	for i := 0; i < len(lines); {
		j := i + 1
		for j < len(lines) && lines[j] == lines[i] {
			j++
		}
		if j-i > 1 {
			runs = append(runs, fmt.Sprintf("%s (%d times)", lines[i], j-i))
		} else {
			runs = append(runs, lines[i])
		}
		i = j
	}
	if len(runs) > n {
		runs = runs[len(runs)-n:]
	}
	return strings.Join(runs, " | ")
}

// readTail reads at most max bytes from the end of the file at path and
// reports whether it left earlier bytes out. A missing file reads empty.
func readTail(path string, max int64) (data []byte, cut bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("open log: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, false, fmt.Errorf("stat log: %w", err)
	}
	off := int64(0)
	if fi.Size() > max {
		off = fi.Size() - max
	}
	data, err = io.ReadAll(io.NewSectionReader(f, off, max))
	if err != nil {
		return nil, false, fmt.Errorf("read log: %w", err)
	}
	return data, off > 0, nil
}

// notePrefix follows the time stamp of every line the provider writes into
// a home's log (Provider.note, whose formats begin with "wakegate: ").
const notePrefix = " wakegate: "

// isNote reports whether line is one the provider wrote (Provider.note): an
// RFC 3339 time stamp, then notePrefix.
func isNote(line string) bool {
	stamp, _, ok := strings.Cut(line, notePrefix)
	if !ok || strings.Contains(stamp, " ") {
		return false
	}
	_, err := time.Parse(time.RFC3339, stamp)
	return err == nil
}
