package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/wakegate/wakegate/fault"
)

// LogSource is where a home's log lives and what must never leave it.
type LogSource struct {
	// Files are the log's files, oldest first; the last is the one the
	// home appends to. Missing files read as empty.
	Files []string
	// Secrets are replaced by MaskedSecret in every line served (the
	// home's relay token).
	Secrets []string
}

// Bounds of GET /admin/homes/{id}/logs.
const (
	// DefaultLogLines is how many last lines are served without ?lines=.
	DefaultLogLines = 100
	// MaxLogLines is the most ?lines= may ask for.
	MaxLogLines = 1000
	// MaxLogLine is the longest line served, in bytes; longer lines are
	// cut and end with "...".
	MaxLogLine = 4096
	// MaxLogFollow is how long one ?follow=1 stream lasts at most; the
	// client reconnects for more.
	MaxLogFollow = time.Hour
	// MaskedSecret replaces a secret in a served line.
	MaskedSecret = "[masked]"
	// logPoll is how often a followed log is checked for new lines.
	logPoll = 200 * time.Millisecond
	// logTailWindow is how many bytes of each file are read for the last
	// lines.
	logTailWindow = 1 << 20
)

// LogView is the answer of GET /admin/homes/{id}/logs without follow.
type LogView struct {
	Home  string   `json:"home"`
	Lines []string `json:"lines"`
}

// homeLogs serves the last lines of a home's log as JSON, or with
// ?follow=1 as Server-Sent Events (event "line", one per line): the last
// lines, then each new line as the home writes it, until the client goes,
// the admin listener stops, or MaxLogFollow has passed.
func (s *Server) homeLogs(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	n, follow, err := logQuery(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	src, err := s.b.HomeLog(id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	t := &logTail{src: src}
	lines, err := t.last(n)
	if err != nil {
		fe := fault.New(fault.Internal, "log_unreadable", "the home's log cannot be read")
		fe.Cause = err
		s.fail(w, r, fe)
		return
	}
	if !follow {
		writeJSON(w, http.StatusOK, LogView{Home: id, Lines: lines})
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if sendLines(w, lines) != nil || rc.Flush() != nil {
		return
	}
	t.follow(r, w, rc)
}

// logQuery reads ?lines= and ?follow=.
func logQuery(r *http.Request) (n int, follow bool, err error) {
	q := r.URL.Query()
	n = DefaultLogLines
	if v := q.Get("lines"); v != "" {
		n, err = strconv.Atoi(v)
		if err != nil || n < 0 || n > MaxLogLines {
			return 0, false, fault.New(fault.Invalid, "invalid",
				fmt.Sprintf("lines: want a number from 0 to %d, got %q", MaxLogLines, v)).WithField("lines")
		}
	}
	switch v := q.Get("follow"); v {
	case "", "0", "false":
	case "1", "true":
		follow = true
	default:
		return 0, false, fault.New(fault.Invalid, "invalid", "follow: want 1 or 0, got "+strconv.Quote(v)).WithField("follow")
	}
	return n, follow, nil
}

// sendLines writes each line as one "line" event (its data a JSON string).
func sendLines(w io.Writer, lines []string) error {
	for _, l := range lines {
		b, _ := json.Marshal(l)
		if _, err := fmt.Fprintf(w, "event: line\ndata: %s\n\n", b); err != nil {
			return fmt.Errorf("write log line: %w", err)
		}
	}
	return nil
}

// logTail reads one home's log: its last lines, then what is appended.
type logTail struct {
	src LogSource
	// off is how far the current file has been read; partial is a line
	// read without its end yet.
	off     int64
	partial []byte
}

// last returns up to n last lines of the log (older files first) and
// leaves t at the end of the current file.
func (t *logTail) last(n int) ([]string, error) {
	all := []string{}
	for i, f := range t.src.Files {
		data, size, err := readEnd(f, logTailWindow)
		if err != nil {
			return nil, err
		}
		if i == len(t.src.Files)-1 {
			t.off = size
			// A last line without its end yet is held for follow.
			if j := bytes.LastIndexByte(data, '\n'); j+1 < len(data) {
				t.partial = append([]byte(nil), data[j+1:]...)
				data = data[:j+1]
			}
		}
		all = append(all, t.split(data)...)
	}
	if n == 0 {
		return []string{}, nil
	}
	if len(all) > n {
		all = all[len(all)-n:]
	}
	return all, nil
}

// split cuts data into masked, bounded lines, dropping empty ones.
func (t *logTail) split(data []byte) []string {
	var out []string
	for _, raw := range bytes.Split(data, []byte{'\n'}) {
		l := strings.TrimRight(string(raw), "\r")
		if strings.TrimSpace(l) == "" {
			continue
		}
		out = append(out, t.clean(l))
	}
	return out
}

// clean masks the secrets in l and bounds its length.
func (t *logTail) clean(l string) string {
	for _, sec := range t.src.Secrets {
		if sec != "" {
			l = strings.ReplaceAll(l, sec, MaskedSecret)
		}
	}
	if len(l) > MaxLogLine {
		l = l[:MaxLogLine] + "..."
	}
	return l
}

// follow streams what is appended to the current file until the request
// ends, a write fails or MaxLogFollow has passed. A file that shrank was
// rotated: reading starts again at its beginning.
func (t *logTail) follow(r *http.Request, w io.Writer, rc *http.ResponseController) {
	end := time.NewTimer(MaxLogFollow)
	defer end.Stop()
	poll := time.NewTicker(logPoll)
	defer poll.Stop()
	ping := time.NewTicker(eventPing)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-end.C:
			_, _ = fmt.Fprint(w, "event: end\ndata: \"the stream reached its time limit; reconnect for more\"\n\n")
			_ = rc.Flush()
			return
		case <-ping.C:
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil {
				return
			}
		case <-poll.C:
			lines, err := t.next()
			if err != nil || sendLines(w, lines) != nil {
				return
			}
			if len(lines) == 0 {
				continue
			}
		}
		if rc.Flush() != nil {
			return
		}
	}
}

// next returns the whole lines appended to the current file since the
// last read.
func (t *logTail) next() ([]string, error) {
	path := t.src.Files[len(t.src.Files)-1]
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		t.off, t.partial = 0, nil
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat log: %w", err)
	}
	if fi.Size() < t.off {
		t.off, t.partial = 0, nil
	}
	if fi.Size() == t.off {
		return nil, nil
	}
	data := make([]byte, min(fi.Size()-t.off, logTailWindow))
	n, err := f.ReadAt(data, t.off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read log: %w", err)
	}
	t.off += int64(n)
	data = append(t.partial, data[:n]...)
	j := bytes.LastIndexByte(data, '\n')
	t.partial = append([]byte(nil), data[j+1:]...)
	if len(t.partial) > MaxLogLine {
		// A line that never ends is served in pieces.
		data, t.partial, j = append(data, '\n'), nil, len(data)
	}
	if j < 0 {
		return nil, nil
	}
	return t.split(data[:j]), nil
}

// readEnd returns up to window last bytes of the file at path (from its first
// whole line when that cuts a line) and the file's size. A missing file
// is empty.
func readEnd(path string, window int64) ([]byte, int64, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("open log: %w", err)
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("stat log: %w", err)
	}
	size := fi.Size()
	start := max(size-window, 0)
	data := make([]byte, size-start)
	n, err := f.ReadAt(data, start)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, 0, fmt.Errorf("read log: %w", err)
	}
	data = data[:n]
	if start > 0 {
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	return data, start + int64(n), nil
}
