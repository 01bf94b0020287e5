package config

import (
	"reflect"
	"testing"
)

// TestNearestFieldNeedsOneClearMatch: a key as near to two fields as to
// each other suggests neither, and a short key gets one edit at most.
func TestNearestFieldNeedsOneClearMatch(t *testing.T) {
	fields := map[string]reflect.Type{"kind": nil, "kinds": nil, "id": nil, "target": nil}
	for key, want := range map[string]string{
		"kinx":    "kind",   // one edit from kind, two from kinds
		"kindss":  "kinds",  // one edit from kinds, two from kind
		"idd":     "id",     // one edit
		"tar":     "",       // three edits from target
		"targte":  "target", // two edits
		"TARGET":  "target", // case
		"ki":      "",       // two edits from kind, a short key
		"kin":     "kind",   // one from kind, two from kinds
		"targets": "target",
	} {
		if got := nearestField(key, fields); got != want {
			t.Errorf("nearestField(%q) = %q; want %q", key, got, want)
		}
	}
	if got := nearestField("ab", map[string]reflect.Type{"aa": nil, "bb": nil}); got != "" {
		t.Errorf("a key one edit from two fields suggested %q", got)
	}
}
