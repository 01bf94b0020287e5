package gateway

import (
	"testing"

	"github.com/wakegate/wakegate/fault"
)

// TestRegistrarConflicts walks the one rule that decides who may take a
// home's id and an app's slug, for each source: the config wins over the
// store and over the admin API. Targets are claimed in the store's index
// (TestRegistrarClaims). The gateway is real (New on a temp data dir); no home
// is started.
func TestRegistrarConflicts(t *testing.T) {
	g := claimGateway(t, "apps:\n  - slug: cfgapp\n    home: cfg\n")
	r := g.reg

	homes := []struct {
		name    string
		src     source
		id      string
		refused bool
	}{
		{"a stored home with a config home's id", fromStore, "cfg", true},
		{"a stored home of its own", fromStore, "dyn", false},
		{"an API home replacing a config home", fromAPI, "cfg", false},
		{"an API home of its own", fromAPI, "new", false},
	}
	for _, tc := range homes {
		if err := r.conflict(tc.src, tc.id); (err != nil) != tc.refused {
			t.Errorf("%s: %v, refused %v", tc.name, err, tc.refused)
		}
	}

	apps := []struct {
		name    string
		src     source
		slug    string
		refused bool
		kind    fault.Kind
	}{
		{"a stored app with a config app's slug", fromStore, "cfgapp", true, fault.Internal},
		{"an API app with a config app's slug", fromAPI, "cfgapp", true, fault.Conflict},
		{"an API app of its own", fromAPI, "other", false, 0},
		{"a stored app of its own", fromStore, "other", false, 0},
	}
	for _, tc := range apps {
		err := r.appConflict(tc.src, tc.slug)
		if (err != nil) != tc.refused || (err != nil && fault.KindOf(err) != tc.kind) {
			t.Errorf("%s: %v (kind %v), refused %v", tc.name, err, fault.KindOf(err), tc.refused)
		}
	}
}
