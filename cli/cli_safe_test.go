package cli

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestSafeText checks every kind of terminal control is shown escaped and
// plain text, including non-ASCII letters, is left alone.
func TestSafeText(t *testing.T) {
	cases := []struct {
		in, cell, layout string
	}{
		{"plain home-1 café 東京", "plain home-1 café 東京", "plain home-1 café 東京"},
		{"\x1b]0;TITLE\a", `\x1b]0;TITLE\x07`, `\x1b]0;TITLE\x07`},
		{"\x1b[31mred\x1b[0m", `\x1b[31mred\x1b[0m`, `\x1b[31mred\x1b[0m`},
		{"a\nb\tc\rd", `a\nb\tc\x0dd`, "a\nb\tc\\x0dd"},
		{"del\x7f", `del\u007f`, `del\u007f`},
		{"c1\u009b2J", `c1\u009b2J`, `c1\u009b2J`},
		{"bidi\u202eevil\u2066x\u200f", `bidi\u202eevil\u2066x\u200f`, `bidi\u202eevil\u2066x\u200f`},
		{"bad\xff\xc3", `bad\xff\xc3`, `bad\xff\xc3`},
		{`back\slash`, `back\slash`, `back\slash`},
	}
	for _, c := range cases {
		if got := safeText(c.in, false); got != c.cell {
			t.Errorf("safeText(%q, false) = %q, want %q", c.in, got, c.cell)
		}
		if got := safeText(c.in, true); got != c.layout {
			t.Errorf("safeText(%q, true) = %q, want %q", c.in, got, c.layout)
		}
	}
}

// TestTermWriterKeepsJSONValid checks JSON with DEL, C1 and bidi
// characters (which encoders leave raw) stays valid JSON of the same
// value through termWriter, and a UTF-8 sequence split across writes is
// not escaped as two broken halves.
func TestTermWriterKeepsJSONValid(t *testing.T) {
	v := map[string]string{"reason": "x\x7f\u009b\u202e\x1b]0;T\a é"}
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	tw := &termWriter{w: &out}
	for i := range raw { // one byte at a time
		if _, err := tw.Write(raw[i : i+1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}
	if !isSafe(out.String(), true) {
		t.Fatalf("output still has controls: %q", out.String())
	}
	var back map[string]string
	if err := json.Unmarshal(out.Bytes(), &back); err != nil || back["reason"] != v["reason"] {
		t.Fatalf("through termWriter: %s: %v, decoded %q", out.String(), err, back["reason"])
	}
}
