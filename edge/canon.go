package edge

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// PathError reports a request path that CanonicalPath refuses. The request
// that carried it must be answered with 400 Bad Request and never routed or
// forwarded.
type PathError struct {
	// Path is the escaped path exactly as it was given to CanonicalPath.
	Path string
	// Reason names the rule the path broke, in a few words.
	Reason string
}

// Error names the reason and quotes (a prefix of) the offending path.
func (e *PathError) Error() string {
	const limit = 200
	p := e.Path
	if len(p) > limit {
		p = p[:limit] + "..."
	}
	return fmt.Sprintf("request path %q refused: %s", p, e.Reason)
}

// CanonicalPath takes the escaped path of a request as it arrived on the wire
// (r.URL.EscapedPath(), or the path part of r.RequestURI) and returns the
// canonical decoded path and its escaped form (to set r.URL.Path and
// r.URL.RawPath), or an error (*PathError, which names the problem) meaning the
// request must be refused with 400.
//
// The result is what the gateway routes on and what it forwards upstream, so
// the rules make sure that no later decoding, however aggressive, can read the
// forwarded path as another route or another slug: every percent-decoding
// round, backslash-to-slash translation, Unicode compatibility folding (NFKC)
// or removal of invisible characters an upstream may apply leaves the
// segments of the canonical path as they are.
//
// Refused (PathError):
//   - an empty path, or one that does not start with "/" (such as "*" or an
//     absolute URI);
//   - a raw "?" or "#": the query and fragment are not part of the path;
//   - a "%" not followed by two hex digits;
//   - control characters, raw or percent-encoded: C0 (NUL to US), DEL, and
//     C1 (U+0080 to U+009F);
//   - bytes that do not decode to valid UTF-8 (this also refuses overlong
//     forms such as %C0%AE for ".");
//   - a backslash, raw or encoded (%5C, %5c);
//   - an encoded slash (%2F, %2f): an upstream could decode it into a
//     separator;
//   - double encoding: a literal "%" (sent as %25) followed by two hex digits,
//     raw or encoded (%252e, %25%32%65), or followed by a non-ASCII character
//     that compatibility folding could turn into one (%25 then "２ｅ");
//   - characters whose compatibility form contains "/", "\" or "%"
//     (U+FF0F, U+FF3C, U+FE68, U+FF05, U+FE6A, U+2100, U+2101, U+2105,
//     U+2106);
//   - a segment that is not "." or ".." but becomes one when look-alike dots
//     (U+2024, U+2025, U+FE30, U+FE52, U+FF0E) are folded and invisible
//     characters (nonspacing and enclosing marks, format characters, default
//     ignorables) are removed, and a non-empty segment made of invisible
//     characters only;
//   - a segment that is "." or ".." followed by ";" parameters ("..;x",
//     "..%3B"): servers that strip path parameters would read it as "..".
//
// Canonicalisation of what is accepted:
//   - percent-encoded unreserved characters (A-Z a-z 0-9 - . _ ~) are decoded,
//     so "%2e" becomes "." and "%61" becomes "a";
//   - every other escape stays escaped in rawPath with upper-case hex ("%3f"
//     becomes "%3F"); raw sub-delimiters, ":" and "@" stay raw; any other raw
//     byte (space, non-ASCII, "[", "{", ...) is escaped in rawPath;
//   - repeated slashes collapse to one, then "." and ".." segments are
//     resolved as RFC 3986 remove_dot_segments does: ".." at the root stays at
//     the root ("/../x" is "/x"), and a path whose last segment is empty, "."
//     or ".." ends in "/" ("/apps/a/b/.." is "/apps/a/").
//
// The result satisfies: path starts with "/", has no empty, "." or ".."
// segment except for one trailing "/", and no backslash; url.PathUnescape of
// rawPath is path; a literal "%" in path is never followed by two hex digits,
// so decoding path again changes nothing; and CanonicalPath(rawPath) returns
// path and rawPath again. The common case, an input with no escapes that is
// already canonical, returns the input for both results without allocating.
func CanonicalPath(escaped string) (path, rawPath string, err error) {
	if canonIsClean(escaped) {
		return escaped, escaped, nil
	}
	return canonSlow(escaped, false)
}

// CanonicalPathEncodedSlash is CanonicalPath for a path that an app which
// takes encoded slashes may receive: an encoded slash (%2F, %2f) is not
// refused but kept, as "%2F" in rawPath and "/" in path, as a byte of its
// segment, never a separator. A segment split at its encoded slashes must
// not hold a "." or ".." part, or a look-alike of one, so that an upstream
// that decodes them finds no dot segment. path then holds slashes that are
// not separators: route on rawPath, whose segments are the path's.
// Everything else is as CanonicalPath; for a path without an encoded slash
// both return the same.
func CanonicalPathEncodedSlash(escaped string) (path, rawPath string, err error) {
	if canonIsClean(escaped) {
		return escaped, escaped, nil
	}
	return canonSlow(escaped, true)
}

// HasEncodedSlash reports whether rawPath, a canonical raw path, holds an
// encoded slash: only CanonicalPathEncodedSlash leaves one.
func HasEncodedSlash(rawPath string) bool { return strings.Contains(rawPath, "%2F") }

// LogPath is the path of a canonical request URL as a log shows it: the
// decoded path, but the raw one when it holds an encoded slash, whose
// decoded form would show a separator that is not one.
func LogPath(path, rawPath string) string {
	if HasEncodedSlash(rawPath) {
		return rawPath
	}
	return path
}

// Byte classes of canonClass.
const (
	// canonUnreserved marks RFC 3986 unreserved characters: always raw.
	canonUnreserved = 1 << iota
	// canonSubDelim marks sub-delims, ":" and "@": raw when they came raw,
	// escaped when they came escaped.
	canonSubDelim
	// canonHex marks hexadecimal digits.
	canonHex
)

// canonClass returns the canonUnreserved, canonSubDelim and canonHex bits of c.
func canonClass(c byte) uint8 {
	return canonClassTable[c]
}

// canonClassTable holds canonClass for every byte. It is filled once, here,
// and only read afterwards.
var canonClassTable = func() (t [256]uint8) {
	for c := range 256 {
		switch {
		case 'a' <= c && c <= 'f', 'A' <= c && c <= 'F', '0' <= c && c <= '9':
			t[c] = canonUnreserved | canonHex
		case 'g' <= c && c <= 'z', 'G' <= c && c <= 'Z', strings.IndexByte("-._~", byte(c)) >= 0:
			t[c] = canonUnreserved
		case strings.IndexByte("!$&'()*+,;=:@", byte(c)) >= 0:
			t[c] = canonSubDelim
		}
	}
	return t
}()

// canonIsClean reports whether s is already canonical and free of escapes:
// it starts with "/", holds only unreserved characters, sub-delims, ":", "@"
// and "/", and has no empty (but a trailing), "." or ".." segment and no dot
// segment with parameters. CanonicalPath returns such a path unchanged.
func canonIsClean(s string) bool {
	if len(s) == 0 || s[0] != '/' {
		return false
	}
	start := 1 // first byte of the current segment
	for i := 1; i <= len(s); i++ {
		if i < len(s) && s[i] != '/' {
			if canonClass(s[i]) == 0 {
				return false
			}
			continue
		}
		seg := s[start:i]
		if seg == "" && i < len(s) {
			return false // "//"
		}
		if seg != "" && seg[0] == '.' {
			if semi := strings.IndexByte(seg, ';'); semi >= 0 {
				seg = seg[:semi]
			}
			if seg == "." || seg == ".." {
				return false
			}
		}
		start = i + 1
	}
	return true
}

// canonSlow decodes, checks and resolves any path that canonIsClean does not
// accept as it is; with keepSlash, an encoded slash is a byte of its
// segment (CanonicalPathEncodedSlash).
func canonSlow(s string, keepSlash bool) (string, string, error) {
	refuse := func(reason string) (string, string, error) {
		return "", "", &PathError{Path: s, Reason: reason}
	}
	if s == "" {
		return refuse("empty path")
	}
	if s[0] != '/' {
		return refuse(`path does not start with "/"`)
	}

	// Decode every escape once. dec holds the decoded bytes, wasEscaped
	// whether each one arrived percent-encoded.
	dec := make([]byte, 0, len(s))
	wasEscaped := make([]bool, 0, len(s))
	for i := 0; i < len(s); i++ {
		c, escaped := s[i], false
		if c == '%' {
			if i+2 >= len(s) || canonClass(s[i+1])&canonHex == 0 || canonClass(s[i+2])&canonHex == 0 {
				return refuse("invalid percent escape")
			}
			c, escaped = canonUnhex(s[i+1])<<4|canonUnhex(s[i+2]), true
			i += 2
		}
		switch {
		case c < 0x20 || c == 0x7f:
			return refuse("control character")
		case c == '\\':
			return refuse("backslash")
		case c == '/' && escaped && !keepSlash:
			return refuse("encoded slash")
		case (c == '?' || c == '#') && !escaped:
			return refuse("query or fragment in path")
		}
		dec = append(dec, c)
		wasEscaped = append(wasEscaped, escaped)
	}
	if !utf8.Valid(dec) {
		return refuse("invalid UTF-8")
	}
	for i := 0; i < len(dec); {
		r, n := utf8.DecodeRune(dec[i:])
		switch {
		case r == '%' && canonStartsEscape(dec[i+1:]):
			return refuse("double percent encoding")
		case r >= utf8.RuneSelf && unicode.IsControl(r):
			return refuse("control character")
		case canonSeparatorLookalike(r):
			return refuse(`look-alike of "/", "\" or "%"`)
		}
		i += n
	}

	// Resolve segments as [start, end) spans of dec; dec[0] is '/'.
	type span struct{ start, end int }
	segs := make([]span, 0, 8)
	trailing := false
	for start := 1; start <= len(dec); {
		end := start
		for end < len(dec) && (dec[end] != '/' || wasEscaped[end]) {
			end++
		}
		seg := dec[start:end]
		last := end == len(dec)
		switch string(seg) {
		case "", ".":
			trailing = last
		case "..":
			if len(segs) > 0 {
				segs = segs[:len(segs)-1]
			}
			trailing = last
		default:
			if reason := canonCheckParts(seg, wasEscaped[start:end]); reason != "" {
				return refuse(reason)
			}
			segs = append(segs, span{start, end})
			trailing = false
		}
		start = end + 1
	}
	if len(segs) == 0 {
		return "/", "/", nil
	}

	var raw, plain strings.Builder
	size := 1
	for _, sg := range segs {
		size += 1 + sg.end - sg.start
	}
	raw.Grow(size + 16)
	needPlain := false
	for _, sg := range segs {
		raw.WriteByte('/')
		for k := sg.start; k < sg.end; k++ {
			c := dec[k]
			cls := canonClass(c)
			if cls&canonUnreserved != 0 || (cls&canonSubDelim != 0 && !wasEscaped[k]) {
				raw.WriteByte(c)
				continue
			}
			const hexDigits = "0123456789ABCDEF"
			raw.WriteByte('%')
			raw.WriteByte(hexDigits[c>>4])
			raw.WriteByte(hexDigits[c&0xf])
			needPlain = true
		}
	}
	if trailing {
		raw.WriteByte('/')
	}
	if !needPlain {
		r := raw.String()
		return r, r, nil
	}
	plain.Grow(size)
	for _, sg := range segs {
		plain.WriteByte('/')
		plain.Write(dec[sg.start:sg.end])
	}
	if trailing {
		plain.WriteByte('/')
	}
	return plain.String(), raw.String(), nil
}

// canonUnhex returns the value of the hex digit c.
func canonUnhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

// canonStartsEscape reports whether a literal "%" followed by rest could be
// read as an escape by a later decoder: the next character is not ASCII (it
// could fold into a hex digit), or it is a hex digit and the one after it is a
// hex digit or not ASCII.
func canonStartsEscape(rest []byte) bool {
	if len(rest) == 0 {
		return false
	}
	if rest[0] >= utf8.RuneSelf {
		return true
	}
	if canonClass(rest[0])&canonHex == 0 || len(rest) < 2 {
		return false
	}
	return rest[1] >= utf8.RuneSelf || canonClass(rest[1])&canonHex != 0
}

// canonSeparatorLookalike reports whether r is not "/", "\" or "%" itself but
// its Unicode compatibility form (NFKC) contains one of them.
func canonSeparatorLookalike(r rune) bool {
	switch r {
	case '\uFF0F', // FULLWIDTH SOLIDUS
		'\uFF3C', // FULLWIDTH REVERSE SOLIDUS
		'\uFE68', // SMALL REVERSE SOLIDUS
		'\uFF05', // FULLWIDTH PERCENT SIGN
		'\uFE6A', // SMALL PERCENT SIGN
		'\u2100', // ACCOUNT OF (a/c)
		'\u2101', // ADDRESSED TO THE SUBJECT (a/s)
		'\u2105', // CARE OF (c/o)
		'\u2106': // CADA UNA (c/u)
		return true
	}
	return false
}

// canonCheckParts returns why the decoded segment seg, which is neither
// empty nor "." nor "..", must be refused, or "" if it may stay. escaped
// says which of its bytes arrived percent-encoded: an encoded slash (kept
// only by CanonicalPathEncodedSlash) splits it into parts, each checked
// as a segment of its own, and none may be "." or "..".
func canonCheckParts(seg []byte, escaped []bool) string {
	from := 0
	for i := 0; i <= len(seg); i++ {
		if i < len(seg) && (seg[i] != '/' || !escaped[i]) {
			continue
		}
		if from == 0 && i == len(seg) {
			return canonCheckSegment(seg) // no encoded slash in it
		}
		switch part := seg[from:i]; string(part) {
		case ".", "..":
			return "dot segment behind an encoded slash"
		default:
			if reason := canonCheckSegment(part); reason != "" {
				return reason
			}
		}
		from = i + 1
	}
	return ""
}

// canonCheckSegment returns why the decoded segment (or part of one) seg,
// which is neither "." nor "..", must be refused, or "" if it may stay.
func canonCheckSegment(seg []byte) string {
	head := seg
	for i := 0; i < len(seg); {
		r, n := utf8.DecodeRune(seg[i:])
		if canonIsSemicolon(r) {
			head = seg[:i]
			break
		}
		i += n
	}
	if string(head) == "." || string(head) == ".." {
		return "dot segment with parameters"
	}
	if canonFoldsToDots(head) {
		return "look-alike of a dot segment"
	}
	return ""
}

// canonIsSemicolon reports whether r is ";", which starts a segment's
// parameters for some servers, or a character whose Unicode compatibility
// form (NFKC) is ";" and which a server that folds first reads as one.
func canonIsSemicolon(r rune) bool {
	switch r {
	case ';',
		'\u037E', // GREEK QUESTION MARK
		'\uFE14', // PRESENTATION FORM FOR VERTICAL SEMICOLON
		'\uFE54', // SMALL SEMICOLON
		'\uFF1B': // FULLWIDTH SEMICOLON
		return true
	}
	return false
}

// canonFoldsToDots reports whether seg, which is not exactly "." or "..", is
// read as "", "." or ".." once look-alike dots are folded into "." and
// invisible characters are removed. Only segments with a non-ASCII character
// can qualify.
func canonFoldsToDots(seg []byte) bool {
	dots := 0
	nonASCII := false
	for i := 0; i < len(seg); {
		r, n := utf8.DecodeRune(seg[i:])
		i += n
		switch {
		case r == '.':
			dots++
			continue
		case r < utf8.RuneSelf:
			return false
		}
		nonASCII = true
		switch r {
		case '\u2024', '\uFE52', '\uFF0E': // ONE DOT LEADER, SMALL and FULLWIDTH FULL STOP
			dots++
		case '\u2025', '\uFE30': // TWO DOT LEADER and its vertical form
			dots += 2
		case '\u2026', '\uFE19': // HORIZONTAL ELLIPSIS and its vertical form
			dots += 3
		default:
			if !canonInvisible(r) {
				return false
			}
		}
		if dots > 2 {
			return false
		}
	}
	return nonASCII
}

// canonInvisible reports whether r is a character that normalisers may drop:
// a nonspacing or enclosing mark, a format character or a default ignorable,
// or a character whose compatibility form is one of those.
func canonInvisible(r rune) bool {
	switch r {
	case '\uFF9E', '\uFF9F': // HALFWIDTH KATAKANA (SEMI-)VOICED SOUND MARK fold to U+3099, U+309A
		return true
	}
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf, unicode.Other_Default_Ignorable_Code_Point)
}
