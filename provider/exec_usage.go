package provider

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Usage is what a home's processes use, read from its cgroup.
type Usage struct {
	// Processes is how many processes the home has now.
	Processes int `json:"processes"`
	// CPUSeconds is the CPU time its processes have used since its
	// cgroup was made (cpu.stat usage_usec), user and system.
	CPUSeconds float64 `json:"cpu_s"`
	// MemoryBytes is the memory its processes use now (memory.current);
	// omitted where the memory controller is not enabled for it.
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	// MemoryMaxBytes is the home's memory limit (options.memory_max);
	// omitted when it has none.
	MemoryMaxBytes int64 `json:"memory_max_bytes,omitempty"`
	// OOMKills is how many times the kernel killed a process of the home
	// for going over its memory limit; omitted when none.
	OOMKills int64 `json:"oom_kills,omitempty"`
	// CPUMax is the home's CPU limit in cores (options.cpu_max); omitted
	// when it has none.
	CPUMax float64 `json:"cpu_max,omitempty"`
	// CPUThrottled is how many periods of its CPU limit the home was held
	// back in, and CPUThrottledSeconds for how long in all; omitted when
	// never.
	CPUThrottled        int64   `json:"cpu_throttled,omitempty"`
	CPUThrottledSeconds float64 `json:"cpu_throttled_s,omitempty"`
}

// UsageReporter is a provider that can say what a home's processes use.
type UsageReporter interface {
	// Usage returns what home id uses now; ok is false when the provider
	// cannot tell (no cgroup per home, or the home has none).
	Usage(id string) (u Usage, ok bool)
}

// Usage reads what home id's processes use from its cgroup.
func (e *Exec) Usage(id string) (Usage, bool) {
	e.mu.Lock()
	h := e.homes[id]
	var lim homeLimits
	if h != nil && h.proc != nil {
		lim = h.proc.spec.limits
	}
	e.mu.Unlock()
	if h == nil || h.cgroup == "" {
		return Usage{}, false
	}
	raw, err := os.ReadFile(filepath.Join(h.cgroup, "cpu.stat"))
	if err != nil {
		return Usage{}, false
	}
	var u Usage
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			usec, _ := strconv.ParseInt(v, 10, 64)
			u.CPUSeconds = float64(usec) / 1e6
		}
	}
	if b, err := os.ReadFile(filepath.Join(h.cgroup, "memory.current")); err == nil {
		u.MemoryBytes, _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	}
	e.limits.usage(h, lim, &u)
	pids, _ := cgProcsTree(h.cgroup)
	u.Processes = len(pids)
	return u, true
}

var _ UsageReporter = (*Exec)(nil)
