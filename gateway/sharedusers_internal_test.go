package gateway

import (
	"os"
	"testing"
)

// TestSharedUserMatters: homes that share the gateway's user are worth a
// warning when two or more can reach each other, or when a root gateway
// runs its one home as root, even when told to.
func TestSharedUserMatters(t *testing.T) {
	root := os.Geteuid() == 0
	for _, c := range []struct {
		why  string
		n    int
		want bool
	}{
		{"", 3, false},
		{"not root", 0, false},
		{"not root", 1, root},
		{"exec.users.mode is off", 1, root},
		{"not root", 2, true},
		{"exec.users.mode is off", 2, true},
	} {
		if got := sharedUserMatters(c.why, c.n); got != c.want {
			t.Errorf("sharedUserMatters(%q, %d) = %t under uid %d, want %t", c.why, c.n, got, os.Geteuid(), c.want)
		}
	}
}
