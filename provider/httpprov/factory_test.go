package httpprov

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/wakegate/wakegate/provider"
)

func section(t *testing.T, text string) *yaml.Node {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Content[0]
}

// The section's problems are named by field; a good section builds.
func TestSection(t *testing.T) {
	t.Setenv("HTTPPROV_TEST_SECRET", string(testSecret))
	t.Setenv("HTTPPROV_SHORT_SECRET", "short")
	for _, tc := range []struct {
		name, text string
		want       []string // fields with a problem
	}{
		{"good", "base_url: http://127.0.0.1:1/cp\nsecret: env:HTTPPROV_TEST_SECRET\nretries: 0\nlong_poll: 5s", nil},
		{"no base_url", "secret: env:HTTPPROV_TEST_SECRET", []string{"base_url"}},
		{"bad base_url", "base_url: cp.example\nsecret: env:HTTPPROV_TEST_SECRET", []string{"base_url"}},
		{"secret unset", "base_url: http://cp\nsecret: env:HTTPPROV_NOT_SET", []string{"secret"}},
		{"secret inline", "base_url: http://cp\nsecret: hunter2hunter2hunter2", []string{"secret"}},
		{"secret short", "base_url: http://cp\nsecret: env:HTTPPROV_SHORT_SECRET", []string{"secret"}},
		{"unknown and negative", "base_url: http://cp\nsecret: env:HTTPPROV_TEST_SECRET\nbase: x\nretries: -1\npoll_interval: -1s", []string{"base", "poll_interval", "retries"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sec := section(t, tc.text)
			var got []string
			for _, p := range Factory().CheckSection(sec) {
				got = append(got, p.Field)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("problems in %v, want %v", got, tc.want)
			}
			if tc.want != nil {
				return
			}
			p, err := Factory().New(provider.Env{}, sec)
			if err != nil {
				t.Fatal(err)
			}
			hp := p.(*Provider)
			defer func() { _ = hp.Close() }()
			if hp.c.Retries != 0 || hp.c.LongPoll.String() != "5s" || hp.base.Path != "/cp" {
				t.Fatalf("config = %+v, want no retries, a 5s long poll, base path /cp", hp.c)
			}
		})
	}
}

// A home may carry a command and any options, but no env or working_dir.
func TestCheckHome(t *testing.T) {
	reg := provider.NewRegistry()
	reg.MustRegister("http", Factory())
	avail := []string{"http"}
	if ps := reg.CheckHome("http", avail, provider.Settings{Command: []string{"app"}, Options: []byte(`{"size":"small"}`)}); len(ps) != 0 {
		t.Fatalf("problems %v, want none", ps)
	}
	ps := reg.CheckHome("http", avail, provider.Settings{Env: []string{"A=1"}, Dir: "/srv", Options: []byte(`{"size":"small"}`)})
	var fields []string
	for _, p := range ps {
		fields = append(fields, p.Field)
	}
	if strings.Join(fields, ",") != "env,working_dir" {
		t.Fatalf("problems in %v, want env and working_dir", fields)
	}
}
