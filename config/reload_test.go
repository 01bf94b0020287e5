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
