package config_test

import (
	"strings"
	"testing"

	"github.com/wakegate/wakegate/provider/all"
)

// TestConfigErrorsNeverEchoSecrets writes secrets literally where a
// secret reference (env:NAME or file:PATH) belongs and checks the config
// errors name the fields but never the secrets' text.
func TestConfigErrorsNeverEchoSecrets(t *testing.T) {
	const secret = "S3cr3t-literal-value-0123456789abcdef"
	cases := map[string]string{
		"providers.http.secret": "providers:\n  http:\n    base_url: http://127.0.0.1:1/cp\n    secret: " + secret + "\nhomes:\n  - id: a\n    provider: http\n",
		"relay_token":           "homes:\n  - id: a\n    relay_token: " + secret + "\n",
		"redis.password":        "redis:\n  url: redis://127.0.0.1:1\n  password: " + secret + "\n",
		"webhooks[0].secret":    "webhooks:\n  - url: http://127.0.0.1:1/\n    secret: " + secret + "\n",
	}
	for name, cfg := range cases {
		_, err := all.Load("test.yaml", []byte(cfg))
		if err == nil {
			t.Errorf("%s: a literal secret was accepted", name)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: the error echoes the secret:\n%v", name, err)
		}
	}
}
