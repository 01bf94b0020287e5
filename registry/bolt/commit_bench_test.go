package bolt_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/bolt"
	"github.com/wakegate/wakegate/registry/registrytest"
)

// BenchmarkParallelLocks is what a storm of wakes asks of the store: many
// goroutines at once, each taking a lock of its own (a home's lifecycle
// lock), writing its home's record under it (fenced, as the record of a
// waking home is) and releasing the lock, on a file in the temp dir (a
// real disk, whose sync is what a commit waits for). tx/op is the
// transactions committed per wake of that kind. (Writers are rounded to
// a multiple of GOMAXPROCS; one writer runs alone.)
func BenchmarkParallelLocks(b *testing.B) {
	for _, writers := range []int{1, 2, 16, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			ctx := context.Background()
			path := filepath.Join(b.TempDir(), "state.db")
			s, err := bolt.Open(path, bolt.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var n atomic.Int64
			homes := make(chan registry.Home, 256)
			for range max(writers, runtime.GOMAXPROCS(0)) * 2 {
				h, err := s.PutHome(ctx, registrytest.SampleHome(fmt.Sprintf("b%d", n.Add(1))), registry.Cond{})
				if err != nil {
					b.Fatal(err)
				}
				homes <- h
			}
			before := testbin.BoltTxID(b, path)
			wake := func(h registry.Home) (registry.Home, bool) {
				l, err := s.Lock(ctx, "home/"+h.ID, "gw", time.Minute)
				if err != nil {
					b.Error(err)
					return h, false
				}
				h.Status = registry.StatusWaking
				if h, err = s.PutHome(ctx, h, registry.Cond{Generation: h.Generation, Owner: h.Owner}.Fenced(l)); err != nil {
					b.Error(err)
					return h, false
				}
				if err := s.Unlock(ctx, l); err != nil {
					b.Error(err)
					return h, false
				}
				return h, true
			}
			b.ResetTimer()
			if writers == 1 {
				h, ok := <-homes, true
				for i := 0; i < b.N && ok; i++ {
					h, ok = wake(h)
				}
			} else {
				b.SetParallelism(max(1, writers/runtime.GOMAXPROCS(0)))
				b.RunParallel(func(pb *testing.PB) {
					h, ok := <-homes, true
					for ok && pb.Next() {
						h, ok = wake(h)
					}
				})
			}
			b.StopTimer()
			b.ReportMetric(float64(testbin.BoltTxID(b, path)-before)/float64(b.N), "tx/op")
		})
	}
}
