package orphans_test

import (
	"fmt"
	"io/fs"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wakegate/wakegate/provider/exec/orphans"
)

// TestKindOf covers how a child the gateway adopted is told to be a
// home's from its environment, including the environments the gateway
// cannot read: a process on its way out (no memory, ESRCH) and one that
// made itself not dumpable under a gateway that is not root (EACCES).
func TestKindOf(t *testing.T) {
	want, prefix := []byte("WAKEGATE_HOME=h1"), []byte("WAKEGATE_HOME=")
	env := func(kv ...string) []byte {
		var b []byte
		for _, s := range kv {
			b = append(append(b, s...), 0)
		}
		return b
	}
	for _, tc := range []struct {
		name         string
		env          []byte
		err          error
		gatewayGroup bool
		kind         orphans.Kind
	}{
		{"names the home", env("PATH=/bin", "WAKEGATE_HOME=h1"), nil, false, orphans.Mine},
		{"names another home", env("WAKEGATE_HOME=h10"), nil, false, orphans.Other},
		{"names no home", env("PATH=/bin"), nil, false, orphans.Unknown},
		{"empty environment", nil, nil, false, orphans.Unknown},
		{"the gateway's own child", env("PATH=/bin"), nil, true, orphans.Other},
		{"exiting", nil, fmt.Errorf("open: %w", unix.ESRCH), false, orphans.Exiting},
		{"gone", nil, fmt.Errorf("open: %w", fs.ErrNotExist), false, orphans.Exiting},
		{"not dumpable", nil, fmt.Errorf("open: %w", unix.EACCES), false, orphans.Unknown},
		{"not dumpable, the gateway's", nil, fmt.Errorf("open: %w", unix.EACCES), true, orphans.Other},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := orphans.KindOf(tc.env, tc.err, want, prefix, tc.gatewayGroup); got != tc.kind {
				t.Errorf("KindOf = %d, want %d", got, tc.kind)
			}
		})
	}
}
