package edge

import (
	"errors"
	"net/url"
	pathpkg "path"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// FuzzCanonicalPath checks the output invariants of CanonicalPath and its
// security property against decoders more aggressive than any upstream.
func FuzzCanonicalPath(f *testing.F) {
	for _, tc := range canonCases {
		f.Add(tc.in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		path, raw, err := CanonicalPath(in)
		if err != nil {
			var pe *PathError
			if !errors.As(err, &pe) || pe.Path != in || pe.Reason == "" {
				t.Fatalf("CanonicalPath(%q): error %v is not a *PathError naming the input and a reason", in, err)
			}
			if path != "" || raw != "" {
				t.Fatalf("CanonicalPath(%q) refused but returned %q, %q", in, path, raw)
			}
			return
		}
		canonCheckAccepted(t, in, path, raw)
	})
}

// canonCheckAccepted asserts every promise CanonicalPath makes about an
// accepted input in and its results path and raw.
func canonCheckAccepted(t *testing.T, in, path, raw string) {
	t.Helper()

	// Shape of path.
	if !strings.HasPrefix(path, "/") {
		t.Fatalf("CanonicalPath(%q): path %q does not start with /", in, path)
	}
	for _, bad := range []string{"//", "/./", "/../", `\`} {
		if strings.Contains(path, bad) {
			t.Fatalf("CanonicalPath(%q): path %q contains %q", in, path, bad)
		}
	}
	if strings.HasSuffix(path, "/.") || strings.HasSuffix(path, "/..") {
		t.Fatalf("CanonicalPath(%q): path %q ends in a dot segment", in, path)
	}
	if !utf8.ValidString(path) {
		t.Fatalf("CanonicalPath(%q): path %q is not UTF-8", in, path)
	}
	for _, r := range path {
		if unicode.IsControl(r) {
			t.Fatalf("CanonicalPath(%q): path %q holds control character %U", in, path, r)
		}
	}

	// Shape of raw: pchar and "/" only, escapes upper-case and never of an
	// unreserved character.
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c == '%' {
			if i+2 >= len(raw) || !canonIsUpperHex(raw[i+1]) || !canonIsUpperHex(raw[i+2]) {
				t.Fatalf("CanonicalPath(%q): raw %q has a bad escape at %d", in, raw, i)
			}
			if d := canonUnhex(raw[i+1])<<4 | canonUnhex(raw[i+2]); canonClass(d)&canonUnreserved != 0 {
				t.Fatalf("CanonicalPath(%q): raw %q escapes unreserved %q", in, raw, d)
			}
			i += 2
			continue
		}
		if c != '/' && canonClass(c) == 0 {
			t.Fatalf("CanonicalPath(%q): raw %q holds raw byte %q", in, raw, c)
		}
	}

	// raw is the escaped form of path, as net/url sees it.
	if dec, err := url.PathUnescape(raw); err != nil || dec != path {
		t.Fatalf("CanonicalPath(%q): PathUnescape(%q) = %q, %v; want %q", in, raw, dec, err, path)
	}
	if u := (url.URL{Path: path, RawPath: raw}); u.EscapedPath() != raw {
		t.Fatalf("CanonicalPath(%q): url.URL{Path: %q, RawPath: %q}.EscapedPath() = %q", in, path, raw, u.EscapedPath())
	}

	// Idempotent.
	if p2, r2, err := CanonicalPath(raw); err != nil || p2 != path || r2 != raw {
		t.Fatalf("CanonicalPath(%q) = %q, %q but CanonicalPath(%q) = %q, %q, %v", in, path, raw, raw, p2, r2, err)
	}

	// The input, decoded as aggressively as a hostile upstream might, is the
	// same path once cleaned, so it names the same route and slug.
	hostile := pathpkg.Clean(canonHostileDecode(in, false))
	if hostile != pathpkg.Clean(path) {
		t.Fatalf("CanonicalPath(%q) = %q, but a hostile decoder reads %q", in, path, hostile)
	}
	for _, prefix := range []string{"/apps/", "/node/"} {
		if want, ok := canonRoute(hostile, prefix); ok {
			if got, ok := canonRoute(path, prefix); !ok || got != want {
				t.Fatalf("CanonicalPath(%q) = %q routes to %q%q, a hostile decoder to %q%q", in, path, prefix, got, prefix, want)
			}
		}
	}

	// What is forwarded keeps its segments through any further decoding,
	// including Unicode compatibility folding, removal of invisible
	// characters and removal of ";" path parameters.
	forwarded := canonHostileDecode(raw, true)
	if strings.Count(forwarded, "/") != strings.Count(path, "/") {
		t.Fatalf("CanonicalPath(%q) = %q, %q; folded it reads %q, with other separators", in, path, raw, forwarded)
	}
	segs := strings.Split(forwarded, "/")
	for i, seg := range segs[1:] {
		head, _, _ := strings.Cut(seg, ";")
		if head == "." || head == ".." || (seg == "" && i != len(segs)-2) {
			t.Fatalf("CanonicalPath(%q) = %q, %q; folded it reads %q, with segment %q", in, path, raw, forwarded, seg)
		}
	}
}

// canonRoute returns the slug or target of p under prefix ("/apps/" or
// "/node/") and whether p is on that route ("/apps/x" or "/apps/x/...").
func canonRoute(p, prefix string) (string, bool) {
	if len(p) <= len(prefix) || !strings.HasPrefix(p, prefix) {
		return "", false
	}
	rest := p[len(prefix):]
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		rest = rest[:i]
	}
	return rest, rest != ""
}

// canonHostileDecode decodes s until nothing changes: every valid escape is
// decoded (invalid ones are kept, as lenient decoders do), backslashes become
// slashes and, with fold, the text is NFKC-normalised and stripped of
// nonspacing and enclosing marks, format characters and default ignorables.
func canonHostileDecode(s string, fold bool) string {
	for range 64 {
		t := canonLenientUnescape(s)
		t = strings.ReplaceAll(t, `\`, "/")
		if fold {
			t = norm.NFKC.String(t)
			t = strings.Map(func(r rune) rune {
				if r >= utf8.RuneSelf && unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf, unicode.Other_Default_Ignorable_Code_Point) {
					return -1
				}
				return r
			}, t)
		}
		if t == s {
			return t
		}
		s = t
	}
	return s
}

// canonLenientUnescape decodes every "%" followed by two hex digits in s and
// keeps any other "%" as it is.
func canonLenientUnescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && canonClass(s[i+1])&canonHex != 0 && canonClass(s[i+2])&canonHex != 0 {
			b.WriteByte(canonUnhex(s[i+1])<<4 | canonUnhex(s[i+2]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// canonIsUpperHex reports whether c is 0-9 or A-F.
func canonIsUpperHex(c byte) bool {
	return '0' <= c && c <= '9' || 'A' <= c && c <= 'F'
}

// FuzzCanonicalPathEncodedSlash checks CanonicalPathEncodedSlash: what
// CanonicalPath accepts it returns the same; what it adds (encoded
// slashes) stays encoded, never a separator, and no decoding of the
// forwarded path finds a dot segment or another route.
func FuzzCanonicalPathEncodedSlash(f *testing.F) {
	for _, tc := range canonCases {
		f.Add(tc.in)
	}
	for _, tc := range slashCases {
		f.Add(tc.in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		path, raw, err := CanonicalPathEncodedSlash(in)
		sp, sr, serr := CanonicalPath(in)
		if serr == nil && (err != nil || path != sp || raw != sr) {
			t.Fatalf("CanonicalPath(%q) = %q, %q but CanonicalPathEncodedSlash gives %q, %q, %v", in, sp, sr, path, raw, err)
		}
		if err != nil {
			var pe *PathError
			if !errors.As(err, &pe) || pe.Path != in || pe.Reason == "" || path != "" || raw != "" {
				t.Fatalf("CanonicalPathEncodedSlash(%q): %q, %q, %v: want a *PathError naming the input and a reason", in, path, raw, err)
			}
			return
		}
		slashCheckAccepted(t, in, path, raw)
	})
}

// slashCheckAccepted asserts what CanonicalPathEncodedSlash promises about
// an accepted input in and its results path and raw.
func slashCheckAccepted(t *testing.T, in, path, raw string) {
	t.Helper()
	if !strings.HasPrefix(raw, "/") || strings.Contains(raw, "//") {
		t.Fatalf("CanonicalPathEncodedSlash(%q): raw %q does not start with / or holds //", in, raw)
	}
	segs := strings.Split(raw, "/")
	for i, seg := range segs[1:] {
		if seg == "." || seg == ".." || (seg == "" && i != len(segs)-2) {
			t.Fatalf("CanonicalPathEncodedSlash(%q): raw %q has segment %q", in, raw, seg)
		}
	}
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c == '%' {
			if i+2 >= len(raw) || !canonIsUpperHex(raw[i+1]) || !canonIsUpperHex(raw[i+2]) {
				t.Fatalf("CanonicalPathEncodedSlash(%q): raw %q has a bad escape at %d", in, raw, i)
			}
			i += 2
			continue
		}
		if c != '/' && canonClass(c) == 0 {
			t.Fatalf("CanonicalPathEncodedSlash(%q): raw %q holds raw byte %q", in, raw, c)
		}
	}
	if dec, err := url.PathUnescape(raw); err != nil || dec != path {
		t.Fatalf("CanonicalPathEncodedSlash(%q): PathUnescape(%q) = %q, %v; want %q", in, raw, dec, err, path)
	}
	if u := (url.URL{Path: path, RawPath: raw}); u.EscapedPath() != raw {
		t.Fatalf("CanonicalPathEncodedSlash(%q): url.URL{Path: %q, RawPath: %q}.EscapedPath() = %q", in, path, raw, u.EscapedPath())
	}
	if p2, r2, err := CanonicalPathEncodedSlash(raw); err != nil || p2 != path || r2 != raw {
		t.Fatalf("CanonicalPathEncodedSlash(%q) = %q, %q but again on %q = %q, %q, %v", in, path, raw, raw, p2, r2, err)
	}
	// A route named in raw without an encoded slash is the route a hostile
	// decoder of the input reads.
	hostile := pathpkg.Clean(canonHostileDecode(in, false))
	for _, prefix := range []string{"/apps/", "/node/"} {
		if name, ok := canonRoute(raw, prefix); ok && !HasEncodedSlash(name) {
			if got, ok := canonRoute(hostile, prefix); !ok || got != mustUnescape(t, name) {
				t.Fatalf("CanonicalPathEncodedSlash(%q) = %q routes to %q%q, a hostile decoder to %q (%q)", in, raw, prefix, name, hostile, got)
			}
		}
	}
	// However far the forwarded path is decoded and folded, no segment of
	// it is a dot segment.
	forwarded := canonHostileDecode(raw, true)
	for _, seg := range strings.Split(forwarded, "/") {
		if head, _, _ := strings.Cut(seg, ";"); head == "." || head == ".." {
			t.Fatalf("CanonicalPathEncodedSlash(%q) = %q; folded it reads %q, with segment %q", in, raw, forwarded, seg)
		}
	}
}

// mustUnescape is url.PathUnescape of s, which must succeed.
func mustUnescape(t *testing.T, s string) string {
	t.Helper()
	u, err := url.PathUnescape(s)
	if err != nil {
		t.Fatalf("PathUnescape(%q): %v", s, err)
	}
	return u
}
