package cli

import (
	"testing"

	"github.com/wakegate/wakegate/provider"
)

// The usage line of `home get` says what a home uses against its limits.
func TestUsageLine(t *testing.T) {
	for _, c := range []struct {
		u    provider.Usage
		want string
	}{
		{provider.Usage{Processes: 2, CPUSeconds: 1.25}, "usage: 2 processes, 1.2s CPU"},
		{provider.Usage{Processes: 1, CPUSeconds: 0.5, MemoryBytes: 8 << 20},
			"usage: 1 processes, 0.5s CPU, memory 8.0 MiB"},
		{provider.Usage{Processes: 1, MemoryBytes: 64 << 20, MemoryMaxBytes: 128 << 20, OOMKills: 2},
			"usage: 1 processes, 0.0s CPU, memory 64.0 MiB of 128.0 MiB, 2 killed over memory_max"},
		{provider.Usage{Processes: 3, CPUSeconds: 9, MemoryMaxBytes: 1 << 30, CPUMax: 0.5, CPUThrottled: 4, CPUThrottledSeconds: 2.5},
			"usage: 3 processes, 9.0s CPU, memory_max 1024.0 MiB, cpu_max 0.5 cores (held back 2.5s)"},
	} {
		if got := usageLine(c.u); got != c.want {
			t.Errorf("usageLine(%+v) = %q, want %q", c.u, got, c.want)
		}
	}
}
