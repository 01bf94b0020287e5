package wake_test

import (
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/wakegate/wakegate/rolls"
)

// BenchmarkRollVsColdWake compares the time of a request that meets a stale
// sleeping home, and is answered by it once it is rolled (recreate, probe,
// version assert, commit), with the time of a request that meets the same
// home asleep on the target version (a plain cold wake). Each iteration
// takes 10 of each; the medians are reported in milliseconds. The demo home
// boots in 100ms.
func BenchmarkRollVsColdWake(b *testing.B) {
	r := newRollRig(b, "", rolls.Lazy)
	r.version("h1")
	var rolled, cold []float64
	for i := 0; i < b.N; i++ {
		for j := 0; j < 10; j++ {
			want := strconv.Itoa(i*10 + j + 2)
			r.setTarget(want, nil)
			r.suspend("h1")
			t0 := time.Now()
			if got := r.version("h1"); got != want {
				b.Fatalf("rolled request answered by %q, want %q", got, want)
			}
			rolled = append(rolled, float64(time.Since(t0).Microseconds())/1000)
			r.suspend("h1")
			t0 = time.Now()
			if got := r.version("h1"); got != want {
				b.Fatalf("cold request answered by %q, want %q", got, want)
			}
			cold = append(cold, float64(time.Since(t0).Microseconds())/1000)
		}
	}
	b.ReportMetric(median(rolled), "rolled-ms")
	b.ReportMetric(median(cold), "cold-ms")
	b.ReportMetric(0, "ns/op")
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}
