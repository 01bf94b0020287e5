package execprov

import (
	"fmt"
	"io/fs"
	"testing"

	"golang.org/x/sys/unix"
)

// TestAdoptedKind covers how a child the gateway adopted is told to be a
// home's from its environment, including the environments the gateway
// cannot read: a process on its way out (no memory, ESRCH) and one that
// made itself not dumpable under a gateway that is not root (EACCES).
func TestAdoptedKind(t *testing.T) {
	want := []byte(EnvHome + "=h1")
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
		kind         adopted
	}{
		{"names the home", env("PATH=/bin", EnvHome+"=h1"), nil, false, adoptedMine},
		{"names another home", env(EnvHome + "=h10"), nil, false, adoptedOther},
		{"names no home", env("PATH=/bin"), nil, false, adoptedUnknown},
		{"empty environment", nil, nil, false, adoptedUnknown},
		{"the gateway's own child", env("PATH=/bin"), nil, true, adoptedOther},
		{"exiting", nil, fmt.Errorf("open: %w", unix.ESRCH), false, adoptedExiting},
		{"gone", nil, fmt.Errorf("open: %w", fs.ErrNotExist), false, adoptedExiting},
		{"not dumpable", nil, fmt.Errorf("open: %w", unix.EACCES), false, adoptedUnknown},
		{"not dumpable, the gateway's", nil, fmt.Errorf("open: %w", unix.EACCES), true, adoptedOther},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := adoptedKind(tc.env, tc.err, want, tc.gatewayGroup); got != tc.kind {
				t.Errorf("adoptedKind = %d, want %d", got, tc.kind)
			}
		})
	}
}
