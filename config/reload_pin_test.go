package config_test

import (
	"reflect"
	"testing"

	"github.com/wakegate/wakegate/config"
	"github.com/wakegate/wakegate/provider/all"
)

// TestKeepRestartOnlyPins: a restart-only setting that a reloaded file
// changes keeps its running value and is named; a reloadable one takes the
// file's value and is named by ReloadableChanges.
func TestKeepRestartOnlyPins(t *testing.T) {
	cur, err := all.Load("cur.yaml", []byte("listen: 127.0.0.1:8080\nwake:\n  hold: 1s\n  warm_ttl: 5s\n"))
	if err != nil {
		t.Fatal(err)
	}
	next, err := all.Load("next.yaml", []byte("listen: 127.0.0.1:9090\npublic_url: https://gw.example.com\nwake:\n  hold: 2s\n  warm_ttl: 7s\n"))
	if err != nil {
		t.Fatal(err)
	}
	changed := config.KeepRestartOnly(cur, next)
	if !reflect.DeepEqual(changed, []string{"listen", "public_url", "wake.warm_ttl"}) {
		t.Errorf("restart-only changes: %v, want [listen public_url wake.warm_ttl]", changed)
	}
	if next.Listen != cur.Listen || next.PublicURL != cur.PublicURL || next.Wake.WarmTTL != cur.Wake.WarmTTL {
		t.Errorf("restart-only settings not pinned: listen %q, warm_ttl %v", next.Listen, next.Wake.WarmTTL)
	}
	if got := config.ReloadableChanges(cur, next); !reflect.DeepEqual(got, []string{"wake.hold"}) {
		t.Errorf("reloadable changes: %v, want [wake.hold]", got)
	}
	if next.Wake.Hold == cur.Wake.Hold {
		t.Error("a reloadable setting was pinned")
	}
}
