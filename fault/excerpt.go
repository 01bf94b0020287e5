package fault

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ExcerptBytes bounds the text of a home's answer that Excerpt keeps.
const ExcerptBytes = 200

// Excerpt returns what a home said (a version answer, a probe's answer,
// a command's stderr) fit for a log line, an event or a record: at most
// ExcerptBytes of s, each control or non-printable character and each
// invalid byte written as an escape (\n, \x1b, \u202e), and "…" when s
// was cut. A home's text never reaches an operator's terminal or a record
// as it was sent.
func Excerpt(s string) string {
	cut := false
	if len(s) > ExcerptBytes {
		s, cut = s[:ExcerptBytes], true
		if i := lastStart(s); !utf8.FullRuneInString(s[i:]) {
			s = s[:i] // a rune the cut split
		}
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case r == ' ' || strconv.IsPrint(r):
			b.WriteRune(r)
		default:
			q := strconv.QuoteRuneToASCII(r) // '\n', '\x1b', '\u202e'
			b.WriteString(q[1 : len(q)-1])
		}
		i += n
	}
	if cut {
		b.WriteString("…")
	}
	return b.String()
}

// lastStart is the index of the first byte of s's last rune.
func lastStart(s string) int {
	i := len(s) - 1
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}
