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
// goroutines at once, each taking and releasing a lock of its own (a
// home's lifecycle lock), on a file in the temp dir (a real disk, whose
// sync is what a commit waits for). tx/op is the transactions committed
// per write: 1 without grouping. (Writers are rounded to a multiple of
// GOMAXPROCS.)
func BenchmarkParallelLocks(b *testing.B) {
	for _, writers := range []int{2, 16, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "state.db")
			s, err := bolt.Open(path, bolt.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if _, err := s.PutHome(context.Background(), registrytest.SampleHome("h"), registry.Cond{}); err != nil {
				b.Fatal(err)
			}
			before := testbin.BoltTxID(b, path)
			var n atomic.Int64
			b.SetParallelism(max(1, writers/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				name := fmt.Sprintf("home/b%d", n.Add(1))
				for pb.Next() {
					l, err := s.Lock(context.Background(), name, "gw", time.Minute)
					if err != nil {
						b.Error(err)
						return
					}
					if err := s.Unlock(context.Background(), l); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(testbin.BoltTxID(b, path)-before)/float64(2*b.N), "tx/op")
		})
	}
}
