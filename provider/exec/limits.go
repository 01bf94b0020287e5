package execprov

import (
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/provider/exec/cgroup"
)

// MemorySize is a memory size in bytes (provider.MemorySize).
type MemorySize = provider.MemorySize

// DefaultPidsMax is the process cap of a home when neither the provider
// (Config.PidsMax) nor the home (option pids_max) sets one.
const DefaultPidsMax = 1024

// limitsOf reads the limits of a home's options (CheckHome refused
// unreadable ones); its process cap is pidsMax (Config.PidsMax) unless
// the options set one.
func limitsOf(opts []byte, pidsMax int) cgroup.Limits {
	var o HomeOptions
	if provider.DecodeOptions(opts, &o) != nil {
		o = HomeOptions{}
	}
	if o.PidsMax != 0 {
		pidsMax = o.PidsMax
	}
	return cgroup.Limits{Memory: int64(o.MemoryMax), CPU: o.CPUMax, Pids: int64(max(pidsMax, 0))}
}

// checkLimits returns the problems of a home's limits: bad values, or a
// machine that cannot enforce them.
func checkLimits(cfg Config, o HomeOptions) []provider.Problem {
	var ps []provider.Problem
	if o.MemoryMax < 0 || (o.MemoryMax > 0 && o.MemoryMax < 1<<20) {
		ps = append(ps, provider.Problemf("options.memory_max", "want at least 1MiB, got %d bytes", o.MemoryMax))
	}
	if o.CPUMax < 0 || (o.CPUMax > 0 && o.CPUMax < 0.01) {
		ps = append(ps, provider.Problemf("options.cpu_max", "want at least 0.01 (cores), got %g", o.CPUMax))
	}
	if len(ps) > 0 {
		return ps
	}
	if o.MemoryMax > 0 {
		if why := limitOffered(cfg, "memory"); why != "" {
			ps = append(ps, provider.Problemf("options.memory_max", "%s", why))
		}
	}
	if o.CPUMax > 0 {
		if why := limitOffered(cfg, "cpu"); why != "" {
			ps = append(ps, provider.Problemf("options.cpu_max", "%s", why))
		}
	}
	return ps
}

// limitOffered says why this machine cannot limit a home with controller
// ctl ("memory" or "cpu"), "" when it can: what a gateway with cfg would
// find at start (setUpLimits).
func limitOffered(cfg Config, ctl string) string {
	if c, _ := ParseContainment(string(cfg.Containment)); c == ContainSubreaper {
		return "a limit needs a cgroup per home, and exec.containment is subreaper: set it to auto or cgroup, or remove the limit"
	}
	return cgroup.Offered(ctl)
}

// setUpLimits finds, for containment c, how the homes' memory, CPU and
// processes can be limited (cgroup.SetUp); without a cgroup per home, only
// the process cap, by RLIMIT_NPROC.
func setUpLimits(c containment) cgroup.Support {
	if c.mode != ContainCgroup {
		return cgroup.Unsupported("a limit needs a cgroup per home, and the homes have none (containment: " + c.why + ")")
	}
	return cgroup.SetUp(c.root)
}
