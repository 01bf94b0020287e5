package wake

import (
	"testing"
	"unsafe"
)

// TestRegisteredHomeIsSmall guards the memory a registered home costs the
// engine before it ever wakes: a large gateway holds 100,000 of them.
// What only a woken home needs (its wake history) is allocated when it
// wakes.
func TestRegisteredHomeIsSmall(t *testing.T) {
	if s := unsafe.Sizeof(home{}); s > 512 {
		t.Fatalf("a home is %d bytes before its first wake, want at most 512", s)
	}
}
