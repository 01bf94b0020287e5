package edge

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
	"unsafe"

	"golang.org/x/text/unicode/norm"
)

// canonCase is one row of canonCases: either the canonical pair or the
// expected refusal.
type canonCase struct {
	name    string
	in      string
	path    string // canonical decoded path when accepted
	raw     string // canonical escaped path when accepted
	refused string // reason substring when refused
}

// canonCases are the table of TestCanonicalPath; they also seed the fuzzer.
var canonCases = []canonCase{
	// Clean paths stay as they are.
	{name: "typical", in: "/apps/demo/static/js/app.9f8e7d.js", path: "/apps/demo/static/js/app.9f8e7d.js", raw: "/apps/demo/static/js/app.9f8e7d.js"},
	{name: "root", in: "/", path: "/", raw: "/"},
	{name: "trailing slash kept", in: "/apps/a/", path: "/apps/a/", raw: "/apps/a/"},
	{name: "sub-delims stay raw", in: "/apps/a/b;c=d,e!f$g&h'i(j)k*l+m:n@o", path: "/apps/a/b;c=d,e!f$g&h'i(j)k*l+m:n@o", raw: "/apps/a/b;c=d,e!f$g&h'i(j)k*l+m:n@o"},
	{name: "three dots is a name", in: "/apps/a/.../b", path: "/apps/a/.../b", raw: "/apps/a/.../b"},
	{name: "dot file", in: "/apps/a/.well-known/x", path: "/apps/a/.well-known/x", raw: "/apps/a/.well-known/x"},

	// Dot segments resolve; never above the root.
	{name: "dotdot to another slug", in: "/apps/a/../b/x", path: "/apps/b/x", raw: "/apps/b/x"},
	{name: "encoded dotdot", in: "/apps/a/%2e%2e/b", path: "/apps/b", raw: "/apps/b"},
	{name: "encoded dotdot mixed case", in: "/apps/a/%2E%2e/b", path: "/apps/b", raw: "/apps/b"},
	{name: "half encoded dotdot", in: "/apps/a/.%2e/b", path: "/apps/b", raw: "/apps/b"},
	{name: "dotdot at root", in: "/../x", path: "/x", raw: "/x"},
	{name: "only dotdot", in: "/..", path: "/", raw: "/"},
	{name: "dotdot past root", in: "/apps/../../../etc/passwd", path: "/etc/passwd", raw: "/etc/passwd"},
	{name: "trailing dotdot", in: "/apps/a/b/..", path: "/apps/a/", raw: "/apps/a/"},
	{name: "trailing dot", in: "/apps/a/./b/.", path: "/apps/a/b/", raw: "/apps/a/b/"},
	{name: "node to apps", in: "/node/alice/../../apps/x", path: "/apps/x", raw: "/apps/x"},
	{name: "empty segment before dotdot", in: "/apps/a//../b", path: "/apps/b", raw: "/apps/b"},

	// Repeated slashes collapse.
	{name: "leading double slash", in: "//apps/a", path: "/apps/a", raw: "/apps/a"},
	{name: "inner double slash", in: "/apps//a/", path: "/apps/a/", raw: "/apps/a/"},
	{name: "trailing double slash", in: "/apps/a//", path: "/apps/a/", raw: "/apps/a/"},

	// Escapes: unreserved decoded, the rest kept and upper-cased.
	{name: "encoded unreserved", in: "/apps/a/%61%62c%2D%5f%7e", path: "/apps/a/abc-_~", raw: "/apps/a/abc-_~"},
	{name: "encoded slug", in: "/apps/%64emo/x", path: "/apps/demo/x", raw: "/apps/demo/x"},
	{name: "space", in: "/apps/a/%20x", path: "/apps/a/ x", raw: "/apps/a/%20x"},
	{name: "raw space escaped", in: "/apps/a/b c", path: "/apps/a/b c", raw: "/apps/a/b%20c"},
	{name: "question mark escaped", in: "/apps/a/x%3f", path: "/apps/a/x?", raw: "/apps/a/x%3F"},
	{name: "hash escaped", in: "/apps/a/%23frag", path: "/apps/a/#frag", raw: "/apps/a/%23frag"},
	{name: "encoded sub-delim stays encoded", in: "/apps/a/%21%3a%3B", path: "/apps/a/!:;", raw: "/apps/a/%21%3A%3B"},
	{name: "lone percent", in: "/apps/a/100%25off", path: "/apps/a/100%off", raw: "/apps/a/100%25off"},
	{name: "percent at end", in: "/apps/a/%25", path: "/apps/a/%", raw: "/apps/a/%25"},
	{name: "percent one hex", in: "/apps/a/%252", path: "/apps/a/%2", raw: "/apps/a/%252"},
	{name: "raw brackets escaped", in: "/apps/a/[x]{y}", path: "/apps/a/[x]{y}", raw: "/apps/a/%5Bx%5D%7By%7D"},

	// Unicode.
	{name: "unicode raw", in: "/apps/a/héllo", path: "/apps/a/héllo", raw: "/apps/a/h%C3%A9llo"},
	{name: "unicode encoded lower hex", in: "/apps/a/%e6%97%a5%e6%9c%ac", path: "/apps/a/日本", raw: "/apps/a/%E6%97%A5%E6%9C%AC"},
	{name: "unicode ellipsis is a name", in: "/apps/a/wait…/b", path: "/apps/a/wait…/b", raw: "/apps/a/wait%E2%80%A6/b"},
	{name: "unicode slug", in: "/apps/ü/x", path: "/apps/ü/x", raw: "/apps/%C3%BC/x"},

	// Refused.
	{name: "empty", in: "", refused: "empty"},
	{name: "asterisk", in: "*", refused: "start"},
	{name: "relative", in: "apps/a", refused: "start"},
	{name: "absolute URI", in: "http://x/apps/a", refused: "start"},
	{name: "query", in: "/apps/a/x?", refused: "query"},
	{name: "fragment", in: "/apps/a/x#y", refused: "fragment"},
	{name: "encoded slash", in: "/apps/a/%2fb", refused: "encoded slash"},
	{name: "encoded slash upper", in: "/apps/a/%2Fb", refused: "encoded slash"},
	{name: "dotdot encoded slash", in: "/apps/a/..%2fb", refused: "encoded slash"},
	{name: "all encoded traversal", in: "/apps/a/%2e%2e%2f%2e%2e/b", refused: "encoded slash"},
	{name: "double encoded dotdot", in: "/apps/a/%252e%252e/b", refused: "double"},
	{name: "double encoded slash", in: "/apps/a/..%252fb", refused: "double"},
	{name: "double encoded backslash", in: "/apps/a/..%255cb", refused: "double"},
	{name: "double encoding with encoded digits", in: "/apps/a/%25%32%65%25%32%65/b", refused: "double"},
	{name: "percent before fullwidth digits", in: "/apps/a/%25%EF%BC%92%EF%BD%85", refused: "double"},
	{name: "triple encoding", in: "/apps/a/%25252e", refused: "double"},
	{name: "backslash", in: `/apps/a\..\b`, refused: "backslash"},
	{name: "encoded backslash", in: "/apps/a/%5c../b", refused: "backslash"},
	{name: "encoded backslash upper", in: "/apps/a/..%5Cb", refused: "backslash"},
	{name: "NUL raw", in: "/apps/a/\x00", refused: "control"},
	{name: "NUL encoded", in: "/apps/a/%00", refused: "control"},
	{name: "tab", in: "/apps/a/\tb", refused: "control"},
	{name: "newline encoded", in: "/apps/a/%0a", refused: "control"},
	{name: "DEL encoded", in: "/apps/a/%7F", refused: "control"},
	{name: "C1 control", in: "/apps/a/%C2%85", refused: "control"},
	{name: "bad escape", in: "/apps/a/%zz", refused: "percent escape"},
	{name: "short escape", in: "/apps/a/%2", refused: "percent escape"},
	{name: "percent at end raw", in: "/apps/a/%", refused: "percent escape"},
	{name: "percent percent", in: "/apps/a/%%32%65", refused: "percent escape"},
	{name: "IIS unicode escape", in: "/apps/a/%u002e%u002e/b", refused: "percent escape"},
	{name: "invalid UTF-8", in: "/apps/a/%ff", refused: "UTF-8"},
	{name: "raw invalid UTF-8", in: "/apps/a/\xc3", refused: "UTF-8"},
	{name: "overlong dot", in: "/apps/a/%c0%ae%c0%ae/b", refused: "UTF-8"},
	{name: "dotdot with parameter", in: "/apps/a/..;/b", refused: "parameters"},
	{name: "dotdot with encoded parameter", in: "/apps/a/..%3bx/b", refused: "parameters"},
	{name: "dot with parameter", in: "/apps/a/.;x", refused: "parameters"},
	{name: "dot with fullwidth semicolon", in: "/.\uFF1B", refused: "parameters"},
	{name: "dotdot with encoded small semicolon", in: "/apps/a/..%EF%B9%94x/b", refused: "parameters"},
	{name: "dotdot with greek question mark", in: "/apps/a/..\u037E/b", refused: "parameters"},
	{name: "look-alike dots with vertical semicolon", in: "/apps/a/\uFF0E\uFF0E\uFE14/b", refused: "look-alike"},
	{name: "fullwidth dots", in: "/apps/a/%EF%BC%8E%EF%BC%8E/b", refused: "dot segment"},
	{name: "two dot leader", in: "/apps/a/‥/b", refused: "dot segment"},
	{name: "dot and combining mark", in: "/apps/a/.\u0301./b", refused: "dot segment"},
	{name: "invisible segment", in: "/apps/%E2%80%8B/a/x", refused: "dot segment"},
	{name: "fullwidth solidus", in: "/apps/a/..／b", refused: "look-alike"},
	{name: "fullwidth reverse solidus", in: "/apps/a/..%EF%BC%BCb", refused: "look-alike"},
	{name: "fullwidth percent", in: "/apps/a/％2e％2e/b", refused: "look-alike"},
	{name: "care of", in: "/apps/℅/x", refused: "look-alike"},
}

func TestCanonicalPath(t *testing.T) {
	for _, tc := range canonCases {
		t.Run(tc.name, func(t *testing.T) {
			path, raw, err := CanonicalPath(tc.in)
			if tc.refused != "" {
				var pe *PathError
				if !errors.As(err, &pe) {
					t.Fatalf("CanonicalPath(%q) = %q, %q, %v; want *PathError %q", tc.in, path, raw, err, tc.refused)
				}
				if pe.Path != tc.in || !strings.Contains(pe.Reason, tc.refused) || !strings.Contains(pe.Error(), pe.Reason) {
					t.Fatalf("CanonicalPath(%q) error %+v (%v); want path %q and reason containing %q", tc.in, pe, err, tc.in, tc.refused)
				}
				if path != "" || raw != "" {
					t.Fatalf("CanonicalPath(%q) refused but returned %q, %q", tc.in, path, raw)
				}
				return
			}
			if err != nil {
				t.Fatalf("CanonicalPath(%q): %v", tc.in, err)
			}
			if path != tc.path || raw != tc.raw {
				t.Fatalf("CanonicalPath(%q) = %q, %q; want %q, %q", tc.in, path, raw, tc.path, tc.raw)
			}
			canonCheckAccepted(t, tc.in, path, raw)
		})
	}
}

func TestCanonicalPathErrorMessage(t *testing.T) {
	_, _, err := CanonicalPath("/apps/a/%2f" + strings.Repeat("x", 1000))
	if err == nil {
		t.Fatal("encoded slash accepted")
	}
	msg := err.Error()
	if !strings.Contains(msg, "encoded slash") || !strings.Contains(msg, `"/apps/a/%2f`) {
		t.Fatalf("error %q does not name the reason and the path", msg)
	}
	if len(msg) > 300 {
		t.Fatalf("error message is %d bytes; want the path shortened", len(msg))
	}
}

// TestCanonicalPathCleanIsUnchanged checks the fast path: an already canonical
// path without escapes comes back as the very same strings, without
// allocating.
func TestCanonicalPathCleanIsUnchanged(t *testing.T) {
	clean := "/apps/demo/static/js/app.9f8e7d.js"
	path, raw, err := CanonicalPath(clean)
	if err != nil {
		t.Fatal(err)
	}
	if unsafe.StringData(path) != unsafe.StringData(clean) || unsafe.StringData(raw) != unsafe.StringData(clean) {
		t.Fatalf("clean path was copied: %q, %q", path, raw)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if _, _, err := CanonicalPath(clean); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("CanonicalPath of a clean path made %v allocations; want 0", allocs)
	}
}

// TestCanonicalPathFromServer feeds CanonicalPath what a real net/http server
// hands a handler for requests written byte for byte on a loopback
// connection, and checks the resulting status and canonical path.
func TestCanonicalPathFromServer(t *testing.T) {
	type seen struct{ path, raw string }
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path, raw, err := CanonicalPath(r.URL.EscapedPath())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got <- seen{path, raw}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()

	cases := []struct {
		target string
		status int
		path   string
		raw    string
	}{
		{"/apps/demo/static/js/app.js?v=1", http.StatusNoContent, "/apps/demo/static/js/app.js", "/apps/demo/static/js/app.js"},
		{"/apps/a/%2e%2e/b/x", http.StatusNoContent, "/apps/b/x", "/apps/b/x"},
		{"/apps/a/%2E%2e/%2e%2E/node/n", http.StatusNoContent, "/node/n", "/node/n"},
		{"/apps/a/x%3fy?q", http.StatusNoContent, "/apps/a/x?y", "/apps/a/x%3Fy"},
		{"/apps/a/%C3%A9t%C3%A9", http.StatusNoContent, "/apps/a/été", "/apps/a/%C3%A9t%C3%A9"},
		{"/apps/a/..%2fb", http.StatusBadRequest, "", ""},
		{"/apps/a/%252e%252e/b", http.StatusBadRequest, "", ""},
		{"/apps/a/%5c..%5cb", http.StatusBadRequest, "", ""},
		{"/apps/a/%00", http.StatusBadRequest, "", ""},
	}
	for _, tc := range cases {
		req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		// Opaque keeps the request target exactly as written.
		req.URL.Opaque = strings.SplitN(tc.target, "?", 2)[0]
		if q := strings.SplitN(tc.target, "?", 2); len(q) == 2 {
			req.URL.RawQuery = q[1]
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", tc.target, err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Fatalf("GET %s: status %d, want %d", tc.target, resp.StatusCode, tc.status)
		}
		if tc.status != http.StatusNoContent {
			continue
		}
		s := <-got
		if s.path != tc.path || s.raw != tc.raw {
			t.Fatalf("GET %s: canonical %q, %q; want %q, %q", tc.target, s.path, s.raw, tc.path, tc.raw)
		}
		u := url.URL{Path: s.path, RawPath: s.raw}
		if u.EscapedPath() != s.raw {
			t.Fatalf("GET %s: url.URL{Path: %q, RawPath: %q}.EscapedPath() = %q; RawPath is not used as given", tc.target, s.path, s.raw, u.EscapedPath())
		}
	}
}

// TestCanonicalPathLookalikeTables checks the look-alike tables of canon.go
// against the Unicode compatibility decomposition of every code point: each
// character whose NFKC form holds "/", "\\" or "%" is refused, and exactly the
// characters whose NFKC form, without invisible characters, is empty or one or
// two dots are read as a dot segment; exactly those whose NFKC form holds ";"
// start a segment's parameters.
func TestCanonicalPathLookalikeTables(t *testing.T) {
	for r := rune(utf8.RuneSelf); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		s := string(r)
		folded := norm.NFKC.String(s)
		sep := strings.ContainsAny(folded, `/\%`)
		if sep != canonSeparatorLookalike(r) {
			t.Errorf("%U folds to %q; canonSeparatorLookalike = %v", r, folded, !sep)
		}
		visible := strings.Map(func(r rune) rune {
			if unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf, unicode.Other_Default_Ignorable_Code_Point) {
				return -1
			}
			return r
		}, folded)
		dots := strings.Trim(visible, ".") == ""
		if want := dots && len(visible) <= 2; canonFoldsToDots([]byte(s)) != want {
			t.Errorf("%U folds to %q; canonFoldsToDots = %v", r, visible, !want)
		}
		if dots && len(visible) > 2 && canonFoldsToDots([]byte(".."+s)) {
			t.Errorf("%U folds to %q; canonFoldsToDots counts it as fewer dots", r, visible)
		}
		if semi := strings.Contains(folded, ";"); semi != canonIsSemicolon(r) {
			t.Errorf("%U folds to %q; canonIsSemicolon = %v", r, folded, !semi)
		}
	}
}

// slashCases are the table of TestCanonicalPathEncodedSlash: what it
// accepts beyond CanonicalPath, and what it still refuses.
var slashCases = []canonCase{
	{name: "vhost of one slash", in: "/apps/r/api/queues/%2F/q", path: "/apps/r/api/queues///q", raw: "/apps/r/api/queues/%2F/q"},
	{name: "lower hex upper-cased", in: "/apps/n/@scope%2fname", path: "/apps/n/@scope/name", raw: "/apps/n/@scope%2Fname"},
	{name: "project path", in: "/apps/g/api/v4/projects/group%2Fsub%2Fproject", path: "/apps/g/api/v4/projects/group/sub/project",
		raw: "/apps/g/api/v4/projects/group%2Fsub%2Fproject"},
	{name: "two in a row", in: "/apps/r/%2F%2F/x", path: "/apps/r////x", raw: "/apps/r/%2F%2F/x"},
	{name: "dot segments around it still resolve", in: "/apps/r/a/../b%2Fc/./d", path: "/apps/r/b/c/d", raw: "/apps/r/b%2Fc/d"},
	{name: "dotdot part", in: "/apps/r/..%2Fsecret", refused: "dot segment behind an encoded slash"},
	{name: "dot part", in: "/apps/r/a%2F.%2Fb", refused: "dot segment behind an encoded slash"},
	{name: "encoded dotdot part", in: "/apps/r/%2e%2e%2f%2e%2e/b", refused: "dot segment behind an encoded slash"},
	{name: "look-alike dotdot part", in: "/apps/r/x%2F%EF%BC%8E%EF%BC%8E", refused: "dot segment"},
	{name: "dotdot part with parameters", in: "/apps/r/x%2F..;y", refused: "parameters"},
	{name: "backslash still refused", in: "/apps/r/%2F%5C", refused: "backslash"},
	{name: "double encoded slash still refused", in: "/apps/r/%252F", refused: "double"},
}

func TestCanonicalPathEncodedSlash(t *testing.T) {
	for _, tc := range slashCases {
		t.Run(tc.name, func(t *testing.T) {
			path, raw, err := CanonicalPathEncodedSlash(tc.in)
			if tc.refused != "" {
				var pe *PathError
				if !errors.As(err, &pe) || !strings.Contains(pe.Reason, tc.refused) {
					t.Fatalf("CanonicalPathEncodedSlash(%q) = %q, %q, %v; want a refusal naming %q", tc.in, path, raw, err, tc.refused)
				}
				return
			}
			if err != nil || path != tc.path || raw != tc.raw {
				t.Fatalf("CanonicalPathEncodedSlash(%q) = %q, %q, %v; want %q, %q", tc.in, path, raw, err, tc.path, tc.raw)
			}
			if !HasEncodedSlash(raw) {
				t.Fatalf("HasEncodedSlash(%q) is false", raw)
			}
			slashCheckAccepted(t, tc.in, path, raw)
			if _, _, err := CanonicalPath(tc.in); err == nil {
				t.Fatalf("CanonicalPath(%q) accepts it too", tc.in)
			}
		})
	}
}
