package h1head

import (
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// blockHeads are field lines (through the blank line) that Block.Append
// and Fields both read, or both refuse.
var blockHeads = []string{
	"Content-Type: text/plain\r\nContent-Length: 5\r\n\r\n",
	"content-type:text/html\r\nx-multi: 1\r\nX-MULTI:  2 \r\nx-a_b.c: v\r\n\r\n",
	"Pragma: no-cache\r\n\r\n",
	"Pragma: no-cache\r\nCache-Control: max-age=1\r\n\r\n",
	"Pragma: x\r\nPragma: no-cache\r\n\r\n",
	"Content-Encoding:\r\nContent-Encoding: gzip\r\n\r\n",
	"Content-Encoding: br\r\nDate: today\r\nX-Empty:\r\n\r\n",
	"X-Drop: 1\r\nX-Keep: 2\r\n\r\n",
	"\r\n",
	// refused by both
	"Bad Name: x\r\n\r\n",
	"X-Ctl: a\x01b\r\n\r\n",
	"X-A: 1\r\n folded\r\n\r\n",
	"NoColon\r\n\r\n",
}

// dropX leaves X-Drop out and refuses X-Refuse, for both readers.
func dropX(key string) (keep, ok bool) {
	switch key {
	case "X-Drop":
		return false, true
	case "X-Refuse":
		return false, false
	}
	return true, true
}

func TestBlockMatchesFields(t *testing.T) {
	read := 0
	for _, s := range blockHeads {
		if checkBlock(t, s) {
			read++
		}
	}
	if read != 9 {
		t.Errorf("%d heads read, want 9", read)
	}
}

func FuzzBlockMatchesFields(f *testing.F) {
	for _, s := range blockHeads {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkBlock(t, s) })
}

// checkBlock reads s with Append and with Fields and compares: the same
// refusal, the same fields (the block's lines parsed back), and flags
// that say what the fields hold. It reports whether s was read.
func checkBlock(t *testing.T, s string) bool {
	t.Helper()
	if line := "HTTP/1.1 200 OK\r\n"; End([]byte(line+s)) != len(line)+len(s) {
		return false // both take the rest of a whole plain head only
	}
	want, wantOK := Fields(s, func(key, _ string) (bool, bool) { return dropX(key) })
	var b Block
	gotOK := b.Append(s, func(key []byte, _ string) (bool, bool) { return dropX(string(key)) })
	if gotOK != wantOK {
		t.Fatalf("%q: block ok=%v, Fields ok=%v", s, gotOK, wantOK)
	}
	if !gotOK {
		return false
	}
	// Fields keeps a Cache-Control it added though check dropped the
	// Pragma that brought it; Append keeps it too.
	got := http.Header{}
	for line := range strings.SplitSeq(string(b.Fields), "\r\n") {
		if line == "" {
			continue
		}
		k, v, found := strings.Cut(line, ": ")
		if !found || k != http.CanonicalHeaderKey(k) || v != strings.TrimSpace(v) {
			t.Fatalf("%q: block line %q is not a canonical name and a trimmed value", s, line)
		}
		got[k] = append(got[k], v)
	}
	if !strings.HasSuffix(string(b.Fields), "\r\n") && len(b.Fields) > 0 {
		t.Fatalf("%q: block %q does not end its last line", s, b.Fields)
	}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("%q:\n block  %q\n Fields %q", s, got, want)
	}
	_, typed := want["Content-Type"]
	_, dated := want["Date"]
	if b.Type != typed || b.Date != dated || b.Encoded != (want.Get("Content-Encoding") != "") {
		t.Fatalf("%q: Type=%v Date=%v Encoded=%v, fields %q", s, b.Type, b.Date, b.Encoded, want)
	}
	return true
}
