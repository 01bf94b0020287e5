package gateway

import (
	"fmt"
	"strings"
	"testing"
)

// An app with encoded_slashes takes a path with %2F after its prefix and
// forwards it encoded, as an app such as RabbitMQ's management API needs
// (/api/queues/%2F/q, the default virtual host "/"). Every other route
// still refuses it (400 bad_path), as does a %2F next to a dot segment or
// in a route's own name, and nothing of those is forwarded.
func TestEncodedSlashesOnlyWhereAnAppTakesThem(t *testing.T) {
	r := newHardUpstream(t, nil) // takes encoded slashes
	s := newHardUpstream(t, nil) // takes them, strip_prefix
	a := newHardUpstream(t, nil) // does not
	body := appsConfig("", map[string]*hardUpstream{"a": a}) + fmt.Sprintf(
		"  - slug: r\n    upstream: %q\n    kind: api\n    encoded_slashes: true\n"+
			"  - slug: s\n    upstream: %q\n    kind: api\n    encoded_slashes: true\n    strip_prefix: true\n", r.URL, s.URL)
	addr := hardGateway(t, body)
	const none = ""
	cases := []struct {
		target string // the request-target, sent as is
		status int
		reach  string // "r", "s", "a" or none
		uri    string // the request-target the reached upstream sees
	}{
		{"/apps/r/api/queues/%2F/q", 200, "r", "/apps/r/api/queues/%2F/q"},
		{"/apps/r/@scope%2Fname?x=1", 200, "r", "/apps/r/@scope%2Fname?x=1"},
		{"/apps/r/a/../b%2Fc", 308, none, ""},
		{"/apps/r/api/queues/%2f/q", 308, none, ""},
		{"/apps/s/api/projects/g%2Fp", 200, "s", "/api/projects/g%2Fp"},
		{"/apps/r/..%2Fx", 400, none, ""},
		{"/apps/r/x%2F..%2F..%2Fa", 400, none, ""},
		{"/apps/r/%252F", 400, none, ""},
		{"/apps/a/api/queues/%2F/q", 400, none, ""},
		{"/apps/a/x", 200, "a", "/apps/a/x"},
		{"/apps/r%2Fa/x", 400, none, ""},
		{"/node/h/a%2Fb", 400, none, ""},
		{"/healthz%2F", 400, none, ""},
		{"/_wakegate/x%2Fy", 400, none, ""},
	}
	ups := map[string]*hardUpstream{"r": r, "s": s, "a": a}
	for _, c := range cases {
		before := map[string]int{}
		for n, u := range ups {
			before[n] = len(u.seen())
		}
		res, got := hardExchange(t, addr, "GET "+c.target+" HTTP/1.1\r\nHost: gw\r\nAccept: application/json\r\n\r\n")
		if res.StatusCode != c.status {
			t.Errorf("%s: status %d; want %d (%s)", c.target, res.StatusCode, c.status, got)
		}
		if c.status == 400 && (!strings.Contains(got, "bad_path") || strings.Contains(got, "%2F")) {
			t.Errorf("%s: 400 without bad_path, or naming the path: %s", c.target, got)
		}
		for n, u := range ups {
			d := len(u.seen()) - before[n]
			switch {
			case n == c.reach && (d != 1 || u.last(t).URI != c.uri):
				t.Errorf("%s: %s got %d requests, the last %q; want one, %q", c.target, n, d, u.last(t).URI, c.uri)
			case n != c.reach && d != 0:
				t.Errorf("%s: %s got %d requests; want none", c.target, n, d)
			}
		}
	}
}
