package execprov

import (
	"path/filepath"
	"strconv"
	"strings"

	"github.com/wakegate/wakegate/internal/sysfile"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/exec/cgroup"
)

// Usage reads what home id's processes use from its cgroup.
func (e *Provider) Usage(id string) (provider.Usage, bool) {
	e.mu.Lock()
	h := e.homes[id]
	var lim cgroup.Limits
	if h != nil {
		lim = h.limits
	}
	e.mu.Unlock()
	if h == nil || h.cgroup == "" {
		return provider.Usage{}, false
	}
	raw, err := sysfile.Read(filepath.Join(h.cgroup, "cpu.stat"))
	if err != nil {
		return provider.Usage{}, false
	}
	var u provider.Usage
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			usec, _ := strconv.ParseInt(v, 10, 64)
			u.CPUSeconds = float64(usec) / 1e6
		}
	}
	if b, err := sysfile.Read(filepath.Join(h.cgroup, "memory.current")); err == nil {
		u.MemoryBytes, _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	}
	e.limits.Usage(h.cgroup, h.id, lim, &u)
	pids, _ := cgroup.ProcsTree(h.cgroup)
	u.Processes = len(pids)
	return u, true
}

var _ provider.UsageReporter = (*Provider)(nil)
