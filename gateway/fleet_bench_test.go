package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/registry/registrytest"

	"github.com/wakegate/wakegate/internal/testbin"
)

// redisCommands returns the number of commands the server at addr has
// processed (INFO stats), over a plain connection so that the count is the
// gateway's and this read's alone.
func redisCommands(b *testing.B, addr string) int64 {
	b.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("INFO stats\r\n")); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	n := 0
	for !strings.Contains(string(buf[:n]), "total_net_input_bytes") {
		m, err := c.Read(buf[n:])
		if err != nil {
			b.Fatalf("INFO stats: %v", err)
		}
		n += m
	}
	for _, line := range strings.Split(string(buf[:n]), "\r\n") {
		if v, ok := strings.CutPrefix(line, "total_commands_processed:"); ok {
			total, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return total
		}
	}
	b.Fatal("INFO stats has no total_commands_processed")
	return 0
}

// cpuTime is the CPU time (user and system) this process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkWarmPathFleet is BenchmarkProxyWarmNode's gateway GET with the
// embedded store and with a Redis store: the warm path reads no store, so
// the two should not differ. It reports CPU per request (client and
// gateway, one process) and, with Redis, the server's commands per
// request (the idle loop's one report a second included).
func BenchmarkWarmPathFleet(b *testing.B) {
	for _, store := range []string{"embedded", "redis"} {
		b.Run(store, func(b *testing.B) {
			extra := "wake:\n  warm_ttl: 1h\n  idle_timeout: 0s\nhomes:\n  - id: demo\n"
			var srv *registrytest.RedisServer
			if store == "redis" {
				srv = registrytest.StartRedis(b)
				extra += fmt.Sprintf("redis:\n  url: %q\n", srv.URL())
			}
			gw := e2eStartInProcess(b, extra)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := gw.g.Engine().EnsureAwake(ctx, "demo"); err != nil {
				b.Fatalf("wake: %v", err)
			}
			front := httptest.NewServer(gw.g.Handler())
			defer front.Close()
			var cmds0 int64
			if srv != nil {
				cmds0 = redisCommands(b, srv.Addr())
			}
			cpu0 := cpuTime()
			b.ResetTimer()
			e2eBenchGet(b, front.URL+"/node/demo/bytes/1024", 1024)
			b.StopTimer()
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
			if srv != nil {
				// One INFO of ours is counted too.
				b.ReportMetric(float64(redisCommands(b, srv.Addr())-cmds0-1)/float64(b.N), "redis-cmds/op")
				srv.Kill()
			}
		})
	}
}

// BenchmarkColdWakeFleet measures one cold wake (the home suspended, then
// one GET) with the embedded store and with a Redis store, and with Redis
// the server's commands per wake: the store's round-trips of a cold wake.
func BenchmarkColdWakeFleet(b *testing.B) {
	for _, store := range []string{"embedded", "redis"} {
		b.Run(store, func(b *testing.B) {
			extra := "wake:\n  idle_timeout: 0s\nhomes:\n  - id: demo\n"
			var srv *registrytest.RedisServer
			if store == "redis" {
				srv = registrytest.StartRedis(b)
				extra += fmt.Sprintf("redis:\n  url: %q\n", srv.URL())
			}
			gw := e2eStartInProcess(b, extra)
			front := httptest.NewServer(gw.g.Handler())
			defer front.Close()
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			var cmds int64
			for b.Loop() {
				b.StopTimer()
				suspend(b, gw)
				var c0 int64
				if srv != nil {
					c0 = redisCommands(b, srv.Addr())
				}
				b.StartTimer()
				res, err := client.Get(front.URL + "/node/demo/whoami")
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				b.StopTimer()
				if res.StatusCode != http.StatusOK {
					b.Fatalf("status %d", res.StatusCode)
				}
				if srv != nil {
					cmds += redisCommands(b, srv.Addr()) - c0 - 1
				}
				b.StartTimer()
			}
			if srv != nil {
				b.ReportMetric(float64(cmds)/float64(b.N), "redis-cmds/wake")
				srv.Kill()
			}
		})
	}
}

// suspend suspends the demo home, again while it is refused as busy: a
// session report being written while the suspend reads the fleet's count
// makes it err towards busy (rolls/reports.go).
func suspend(b *testing.B, gw *e2eGateway) {
	b.Helper()
	testbin.Eventually(b, "the home suspended, not busy", func() bool {
		err := gw.g.Engine().Suspend(context.Background(), "demo")
		if err != nil && !fault.Is(err, fault.Busy) {
			b.Fatal(err)
		}
		return err == nil
	})
}
