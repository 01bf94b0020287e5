package execprov

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkQuiesceNeverRan is the shutdown of a gateway with many
// registered exec homes of which none ever ran (ns/op is one whole
// Quiesce of -homes ids).
func BenchmarkQuiesceNeverRan(b *testing.B) {
	const homes = 100000
	ids := make([]string, homes)
	for i := range ids {
		ids[i] = fmt.Sprintf("h%06d", i)
	}
	cfg := testConfig(b.TempDir())
	for b.Loop() {
		e, err := New(cfg, nil)
		if err != nil {
			b.Fatal(err)
		}
		got := e.Quiesce(context.Background(), ids)
		if len(got) != homes || got[0].Ran {
			b.Fatalf("Quiesce = %d entries, first %+v", len(got), got[0])
		}
		_ = e.Close()
	}
}
