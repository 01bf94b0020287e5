package cli

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Text the admin commands print can come from homes: names, reasons,
// probe answers, version strings, log lines. A home that writes terminal
// controls there (a title change, colours, cursor moves, a bidi override
// that reorders what the operator reads) must not reach the operator's
// terminal, so every such character is shown as a visible escape instead.

// safeText returns s with the characters a terminal acts on written as
// visible escapes: C0 controls as \xHH (with keepLayout, newline and tab
// stay as they are; without, they are \n and \t), DEL, C1 controls and
// the invisible bidi and direction marks as \uHHHH, and bytes that are not
// UTF-8 as \xHH. The \uHHHH forms are also JSON escapes of the same
// characters, so JSON passed through stays valid and means the same; a
// JSON encoder already escapes C0 controls and invalid UTF-8.
func safeText(s string, keepLayout bool) string {
	if isSafe(s, keepLayout) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case keepLayout && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// isSafe reports whether safeText would leave s as it is.
func isSafe(s string, keepLayout bool) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1, unsafeRune(r):
			return false
		case r < 0x20 && (!keepLayout || (r != '\n' && r != '\t')):
			return false
		}
		i += size
	}
	return true
}

// unsafeRune reports the characters above the C0 range that safeText
// escapes: DEL, the C1 controls, and the marks that change the direction
// of the text around them.
func unsafeRune(r rune) bool {
	switch {
	case r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// cell is s for one cell or field of a line: nothing in it can break the
// line or the table.
func cell(s string) string { return safeText(s, false) }

// termWriter passes everything written to it through safeText (layout
// kept), so that nothing an admin command prints, whatever the print
// code forgot, can drive the terminal. A UTF-8 sequence split across
// writes is held back until it is whole.
type termWriter struct {
	w    io.Writer
	tail []byte // the start of a UTF-8 sequence cut by the last write
}

// Write escapes p and writes it; it reports len(p) on success.
func (t *termWriter) Write(p []byte) (int, error) {
	buf := append(t.tail, p...)
	t.tail = nil
	// Hold back an incomplete sequence at the end (at most 3 bytes).
	for k := 1; k <= 3 && k <= len(buf); k++ {
		c := buf[len(buf)-k]
		if c < 0x80 {
			break
		}
		if c >= 0xc0 { // a lead byte: is its sequence complete?
			if !utf8.FullRune(buf[len(buf)-k:]) {
				t.tail = append([]byte(nil), buf[len(buf)-k:]...)
				buf = buf[:len(buf)-k]
			}
			break
		}
	}
	if _, err := io.WriteString(t.w, safeText(string(buf), true)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes a held-back incomplete sequence, escaped.
func (t *termWriter) Flush() error {
	if len(t.tail) == 0 {
		return nil
	}
	_, err := io.WriteString(t.w, safeText(string(t.tail), true))
	t.tail = nil
	return err
}
