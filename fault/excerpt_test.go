package fault

import (
	"strings"
	"testing"
)

// Excerpt escapes control and invalid bytes and bounds the text.
func TestExcerpt(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"v1.2.3", "v1.2.3"},
		{"\x1b]0;TITLE\a", `\x1b]0;TITLE\a`},
		{"a\nb\r\tc", `a\nb\r\tc`},
		{"é ok", "é ok"},
		{"rtl\u202eevil", `rtl\u202eevil`},
		{"bad\xffbyte", `bad\xffbyte`},
		{`back\slash`, `back\\slash`},
	} {
		if got := Excerpt(c.in); got != c.want {
			t.Errorf("Excerpt(%q) = %q; want %q", c.in, got, c.want)
		}
	}
	long := strings.Repeat("x", ExcerptBytes-1) + "é" + strings.Repeat("y", 500)
	got := Excerpt(long)
	if want := strings.Repeat("x", ExcerptBytes-1) + "…"; got != want {
		t.Errorf("Excerpt of a long text = %q; want %q", got, want)
	}
}
