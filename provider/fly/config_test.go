package fly_test

import (
	"net"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/provider/fly"
)

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// TestConfigValidateNamesTheField: every bad value is reported with the
// field it sits in, and a token given in place of a reference is never
// echoed.
func TestConfigValidateNamesTheField(t *testing.T) {
	good := func() fly.Config {
		return fly.Config{App: "homes", Token: "env:FLY_API_TOKEN"}
	}
	for _, tc := range []struct {
		field string
		mut   func(*fly.Config)
	}{
		{"app", func(c *fly.Config) { c.App = "Bad App" }},
		{"token", func(c *fly.Config) { c.Token = "fo1_secretsecret" }},
		{"base_url", func(c *fly.Config) { c.BaseURL = "ftp://x" }},
		{"endpoint", func(c *fly.Config) { c.Endpoint = "http://{machine}.internal" }},
		{"endpoint", func(c *fly.Config) { c.Endpoint = "{machine_id}:{port}" }},
		{"port", func(c *fly.Config) { c.Port = 70000 }},
		{"image", func(c *fly.Config) { c.Image = "registry.fly.io/homes:latest" }},
		{"version_from", func(c *fly.Config) { c.VersionFrom = "guess" }},
		{"version_command", func(c *fly.Config) { c.VersionFrom = fly.VersionExec }},
		{"version_key", func(c *fly.Config) { c.VersionKey = "a b" }},
		{"stop_signal", func(c *fly.Config) { c.StopSignal = "SIGSTOP" }},
		{"lease_ttl", func(c *fly.Config) { c.LeaseTTL = 1 }},
	} {
		t.Run(tc.field, func(t *testing.T) {
			c := good()
			tc.mut(&c)
			c.Defaults()
			errs := c.Validate()
			if len(errs) != 1 || errs[0].Field != tc.field {
				t.Fatalf("errors %v, want one for %s", errs, tc.field)
			}
			if strings.Contains(errs[0].Error(), "secretsecret") {
				t.Errorf("the token leaked into %q", errs[0])
			}
		})
	}
	c := good()
	c.Defaults()
	if errs := c.Validate(); len(errs) != 0 {
		t.Fatalf("defaults do not validate: %v", errs)
	}
	if c.BaseURL != fly.DefaultBaseURL || c.Endpoint != fly.DefaultEndpoint || c.Port != 8080 {
		t.Errorf("defaults %+v", c)
	}
	for _, o := range []fly.HomeOptions{{}, {Machine: "m-1"}, {Machine: "m1", Port: -1}} {
		if errs := o.Validate(); len(errs) != 1 {
			t.Errorf("home options %+v: errors %v, want one", o, errs)
		}
	}
}

// TestNewRefusesAMissingToken: the token reference must resolve.
func TestNewRefusesAMissingToken(t *testing.T) {
	_, err := fly.New(fly.Config{App: "homes", Token: "env:WAKEGATE_TEST_NO_SUCH_VAR"}, fly.Options{})
	if err == nil || !strings.Contains(err.Error(), "WAKEGATE_TEST_NO_SUCH_VAR") {
		t.Fatalf("New: %v", err)
	}
}
