package access

import (
	"net/http"
	"strings"
)

// StripCookies removes the cookies named in names, but keep, from h's
// Cookie fields, and leaves every other cookie byte for byte as the client
// sent it (a parse and re-encode would drop or rewrite the values Go's
// cookie parser does not accept). A field left empty is removed. It reports
// whether anything was removed.
func StripCookies(h http.Header, names []string, keep string) bool {
	vs := h["Cookie"]
	if len(vs) == 0 || len(names) == 0 {
		return false
	}
	if !mentionsAny(vs, names, keep) {
		return false // the warm path: no gateway cookie sent
	}
	removed := false
	out := vs[:0:0]
	for _, v := range vs {
		var b strings.Builder
		for pair := range strings.SplitSeq(v, ";") {
			p := strings.TrimSpace(pair)
			if p == "" {
				continue
			}
			name, _, _ := strings.Cut(p, "=")
			name = strings.TrimSpace(name)
			if name != keep && contains(names, name) {
				removed = true
				continue
			}
			if b.Len() > 0 {
				b.WriteString("; ")
			}
			b.WriteString(p)
		}
		if b.Len() > 0 {
			out = append(out, b.String())
		}
	}
	if !removed {
		return false
	}
	if len(out) == 0 {
		delete(h, "Cookie")
	} else {
		h["Cookie"] = out
	}
	return true
}

// mentionsAny reports whether any of vs holds one of names (but keep) as
// a substring: a cheap test before the cookies are split.
func mentionsAny(vs, names []string, keep string) bool {
	for _, n := range names {
		if n == keep {
			continue
		}
		for _, v := range vs {
			if strings.Contains(v, n) {
				return true
			}
		}
	}
	return false
}

func contains(names []string, n string) bool {
	for _, m := range names {
		if m == n {
			return true
		}
	}
	return false
}
