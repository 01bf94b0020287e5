package config

import (
	"reflect"
	"strings"
	"testing"
)

// TestReloadClassifiesEverySection: every top-level field of Config is
// either applied by a reload (homes, apps, access, the reloadable wake
// settings), kept at its running value until a restart, or listed here
// as read only at start without being named by a reload's answer. A field
// added to Config without a place in one of the lists fails this test.
func TestReloadClassifiesEverySection(t *testing.T) {
	known := map[string]bool{}
	for _, f := range append(append([]configField{}, reloadable...), restartOnly...) {
		known[strings.SplitN(f.name, ".", 2)[0]] = true
	}
	for _, k := range []string{"homes", "apps", "access"} {
		known[k] = true // control.Registrar.Reload; the gate's policies
	}
	// reset_store is the command line's, for one start.
	known["-"] = true
	ct := reflect.TypeFor[Config]()
	for i := range ct.NumField() {
		f := ct.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !known[name] {
			t.Errorf("Config.%s (%q) is neither reloadable nor restart-only: add it to reloadable or restartOnly", f.Name, name)
		}
	}
}

// TestKeepRestartOnlyPins: a restart-only setting that a reloaded file
// changes keeps its running value and is named; a reloadable one takes the
// file's value and is named by ReloadableChanges.
func TestKeepRestartOnlyPins(t *testing.T) {
	cur, err := Load("cur.yaml", []byte("listen: 127.0.0.1:8080\nwake:\n  hold: 1s\n  warm_ttl: 5s\n"))
	if err != nil {
		t.Fatal(err)
	}
	next, err := Load("next.yaml", []byte("listen: 127.0.0.1:9090\npublic_url: https://gw.example.com\nwake:\n  hold: 2s\n  warm_ttl: 7s\n"))
	if err != nil {
		t.Fatal(err)
	}
	changed := KeepRestartOnly(cur, next)
	if !reflect.DeepEqual(changed, []string{"listen", "public_url", "wake.warm_ttl"}) {
		t.Errorf("restart-only changes: %v, want [listen public_url wake.warm_ttl]", changed)
	}
	if next.Listen != cur.Listen || next.PublicURL != cur.PublicURL || next.Wake.WarmTTL != cur.Wake.WarmTTL {
		t.Errorf("restart-only settings not pinned: listen %q, warm_ttl %v", next.Listen, next.Wake.WarmTTL)
	}
	if got := ReloadableChanges(cur, next); !reflect.DeepEqual(got, []string{"wake.hold"}) {
		t.Errorf("reloadable changes: %v, want [wake.hold]", got)
	}
	if next.Wake.Hold == cur.Wake.Hold {
		t.Error("a reloadable setting was pinned")
	}
}
