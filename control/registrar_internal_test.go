package control

import (
	"log/slog"
	"testing"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/provider/all"
)

// TestRegistrarConflicts walks the one rule that decides who may take a
// home's id and an app's slug, for each Source: the config wins over the
// store and over the admin API. Targets are claimed in the store's index
// (the gateway's TestRegistrarClaims). The config is read by all.Load;
// the rule needs nothing else.
func TestRegistrarConflicts(t *testing.T) {
	cfg, err := all.Load("conflicts.yaml", []byte(`listen: "127.0.0.1:0"
data_dir: /nonexistent
exec:
  command: ["/bin/true", "{port}"]
homes:
  - id: cfg
    target: cfgt
apps:
  - slug: cfgapp
    home: cfg
`))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	r := NewRegistrar(Deps[Route]{Log: slog.New(slog.DiscardHandler)}, cfg)

	homes := []struct {
		name    string
		src     Source
		id      string
		refused bool
	}{
		{"a stored home with a config home's id", FromStore, "cfg", true},
		{"a stored home of its own", FromStore, "dyn", false},
		{"an API home replacing a config home", FromAPI, "cfg", false},
		{"an API home of its own", FromAPI, "new", false},
	}
	for _, tc := range homes {
		if err := r.Conflict(tc.src, tc.id); (err != nil) != tc.refused {
			t.Errorf("%s: %v, refused %v", tc.name, err, tc.refused)
		}
	}

	apps := []struct {
		name    string
		src     Source
		slug    string
		refused bool
		kind    fault.Kind
	}{
		{"a stored app with a config app's slug", FromStore, "cfgapp", true, fault.Internal},
		{"an API app with a config app's slug", FromAPI, "cfgapp", true, fault.Conflict},
		{"an API app of its own", FromAPI, "other", false, 0},
		{"a stored app of its own", FromStore, "other", false, 0},
	}
	for _, tc := range apps {
		err := r.AppConflict(tc.src, tc.slug)
		if (err != nil) != tc.refused || (err != nil && fault.KindOf(err) != tc.kind) {
			t.Errorf("%s: %v (kind %v), refused %v", tc.name, err, fault.KindOf(err), tc.refused)
		}
	}
}
