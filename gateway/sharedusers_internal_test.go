package gateway

import (
	"os"
	"testing"
)

// TestSharedUserMatters: homes that share the gateway's user are worth a
// warning when two or more can reach each other, or when a root gateway
// runs its one home as root without being told to.
func TestSharedUserMatters(t *testing.T) {
	root := os.Geteuid() == 0
	for _, c := range []struct {
		why    string
		n      int
		chosen bool
		want   bool
	}{
		{"", 3, false, false},
		{"not root", 0, false, false},
		{"not root", 1, false, root},
		{"exec.users.mode is off", 1, true, false},
		{"not root", 2, false, true},
		{"exec.users.mode is off", 2, true, true},
	} {
		if got := sharedUserMatters(c.why, c.n, c.chosen); got != c.want {
			t.Errorf("sharedUserMatters(%q, %d, %t) = %t under uid %d, want %t", c.why, c.n, c.chosen, got, os.Geteuid(), c.want)
		}
	}
}
