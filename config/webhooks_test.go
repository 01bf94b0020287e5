package config_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/config"
	"github.com/wakegate/wakegate/provider/all"
)

// A bad webhook is an error naming its file, line and field: a URL that
// is not http(s), an unknown event type, a secret that is no reference or
// does not resolve, negative numbers.
func TestWebhookErrorsNameTheField(t *testing.T) {
	text := `
webhooks:
  - url: ftp://hooks.example/in
    events: [wake.ready, wake.sneezed]
    secret: env:WAKEGATE_TEST_UNSET_HOOK_SECRET
    timeout: -1s
  - events: [suspend]
    attempts: -2
    queue: -1
  - url: "http:///nohost"
`
	_, err := all.Load("hooks.yaml", []byte(text))
	if err == nil {
		t.Fatal("bad webhooks loaded")
	}
	for _, want := range []string{
		`hooks.yaml:3: webhooks[0].url: want an http:// or https:// URL, got scheme "ftp"`,
		`hooks.yaml:4: webhooks[0].events[1]: unknown event type "wake.sneezed"; want one of wake.start, wake.ready`,
		"hooks.yaml:5: webhooks[0].secret: environment variable WAKEGATE_TEST_UNSET_HOOK_SECRET is not set or empty",
		"hooks.yaml:6: webhooks[0].timeout: must not be negative",
		"hooks.yaml:7: webhooks[1].url: required",
		"hooks.yaml:8: webhooks[1].attempts: must not be negative",
		"hooks.yaml:9: webhooks[1].queue: must not be negative",
		"hooks.yaml:10: webhooks[2].url: names no host",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("errors lack %q:\n%v", want, err)
		}
	}
}

// Defaults fill timeout, attempts and queue; the secret is resolved from
// its file; an empty event list stays empty (every type).
func TestWebhookDefaultsAndSecret(t *testing.T) {
	key := filepath.Join(t.TempDir(), "hook.key")
	if err := os.WriteFile(key, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := all.Load("hooks.yaml", []byte("webhooks:\n  - url: https://hooks.example/in\n    secret: file:"+key+
		"\n  - url: http://127.0.0.1:9/in\n    events: [suspend]\n    timeout: 2s\n    attempts: 1\n    queue: 8\n"))
	if err != nil {
		t.Fatal(err)
	}
	a, b := c.Webhooks[0], c.Webhooks[1]
	if a.Timeout != 5*time.Second || a.Attempts != 4 || a.Queue != 256 || len(a.Events) != 0 || a.SigningKey() != "s3cret" {
		t.Fatalf("defaults: %+v key %q", a, a.SigningKey())
	}
	if b.Timeout != 2*time.Second || b.Attempts != 1 || b.Queue != 8 || !slices.Equal(b.Events, []string{"suspend"}) || b.SigningKey() != "" {
		t.Fatalf("set values: %+v", b)
	}
}

// The webhooks are restart-only: a reload names the change and keeps the
// running list.
func TestWebhooksRestartOnly(t *testing.T) {
	load := func(url string) *config.Config {
		c, err := all.Load("hooks.yaml", []byte("webhooks:\n  - url: "+url+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	cur, next := load("http://127.0.0.1:9/a"), load("http://127.0.0.1:9/b")
	if changed := config.KeepRestartOnly(cur, next); !slices.Contains(changed, "webhooks") {
		t.Fatalf("changed %v, want webhooks named", changed)
	}
	if next.Webhooks[0].URL != "http://127.0.0.1:9/a" {
		t.Fatalf("a reload applied the webhooks: %s", next.Webhooks[0].URL)
	}
}
