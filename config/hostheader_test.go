package config_test

import (
	"strings"
	"testing"

	"github.com/wakegate/wakegate/config"
	"github.com/wakegate/wakegate/provider/all"
)

// The Host rules are checked where they are written, with the choices in
// the message, and check-config notes each route that does not get the
// client's Host.
func TestConfigHostHeader(t *testing.T) {
	checkMarks(t, "host.yaml", `proxy:
  host_header: "bad host/"          # want proxy.host_header
  host_headers:
    homes:
      nb: upstream
      odd: "a b"                    # want proxy.host_headers.homes.odd
`)
	c, err := all.Load("host.yaml", []byte(`proxy:
  host_headers:
    homes: {nb: upstream}
    apps: {api: "api.internal:8443", web: client}
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Proxy.HostHeader != config.HostAuto {
		t.Errorf("proxy.host_header defaults to %q; want auto", c.Proxy.HostHeader)
	}
	notes := strings.Join(c.HostNotes(), "\n")
	for _, want := range []string{"proxy.host_headers.homes.nb: home nb gets its upstream's address",
		"proxy.host_headers.apps.api: app api gets Host api.internal:8443", "proxy.host_headers.apps.web: app web gets the client's Host"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	if c, err := all.Load("plain.yaml", nil); err != nil || len(c.HostNotes()) != 0 {
		t.Errorf("a config that leaves Host alone: notes %q, %v", c.HostNotes(), err)
	}
}
