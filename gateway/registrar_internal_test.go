package gateway

import (
	"testing"

	"github.com/wakegate/wakegate/registry"

	"github.com/wakegate/wakegate/control"
	"github.com/wakegate/wakegate/fault"
)

// TestRegistrarConflicts walks the one rule that decides who may take a
// home's id and an app's slug, for each control.Source: the config wins over the
// store and over the admin API. Targets are claimed in the store's index
// (TestRegistrarClaims). The gateway is real (New on a temp data dir); no home
// is started.
func TestRegistrarConflicts(t *testing.T) {
	g := claimGateway(t, "apps:\n  - slug: cfgapp\n    home: cfg\n")
	r := g.reg

	homes := []struct {
		name    string
		src     control.Source
		id      string
		refused bool
	}{
		{"a stored home with a config home's id", control.FromStore, "cfg", true},
		{"a stored home of its own", control.FromStore, "dyn", false},
		{"an API home replacing a config home", control.FromAPI, "cfg", false},
		{"an API home of its own", control.FromAPI, "new", false},
	}
	for _, tc := range homes {
		if err := r.Conflict(tc.src, tc.id); (err != nil) != tc.refused {
			t.Errorf("%s: %v, refused %v", tc.name, err, tc.refused)
		}
	}

	apps := []struct {
		name    string
		src     control.Source
		slug    string
		refused bool
		kind    fault.Kind
	}{
		{"a stored app with a config app's slug", control.FromStore, "cfgapp", true, fault.Internal},
		{"an API app with a config app's slug", control.FromAPI, "cfgapp", true, fault.Conflict},
		{"an API app of its own", control.FromAPI, "other", false, 0},
		{"a stored app of its own", control.FromStore, "other", false, 0},
	}
	for _, tc := range apps {
		err := r.AppConflict(tc.src, tc.slug)
		if (err != nil) != tc.refused || (err != nil && fault.KindOf(err) != tc.kind) {
			t.Errorf("%s: %v (kind %v), refused %v", tc.name, err, fault.KindOf(err), tc.refused)
		}
	}
}

// useStore puts s in place of g's store, for the gateway and its
// registrar (a test's wrapper that counts or interferes with writes); the
// engine keeps the store it was built with.
func (g *Gateway) useStore(s registry.Store) {
	g.store = s
	g.reg = g.newRegistrar()
}
