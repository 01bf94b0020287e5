package provider

// What only providers of homes on the gateway's own machine can tell or
// do: optional interfaces, found with a type assertion like those of
// registry.go. The exec provider implements them.

// Quiesced is what Quiesce did to one home.
type Quiesced struct {
	// ID is the home.
	ID string
	// Proven is true once the home's process is verified gone, and also
	// when no live process was known or recorded for it.
	Proven bool
	// Err says why the stop failed (then Proven may be false).
	Err error
	// Ran is true when the provider knew a process of the home or had a
	// directory for it (where it records the process it starts); false:
	// the home never ran here, and there was nothing to stop.
	Ran bool
}

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
	// PidsMax is the home's process cap (exec.pids_max, options.pids_max):
	// how many processes and threads it may have at once; omitted when it
	// has none. PidsCap says what holds it: "cgroup" (pids.max of its
	// cgroup v2), "cgroup_v1" (of the v1 pids hierarchy) or "rlimit_nproc"
	// (RLIMIT_NPROC of its own uid).
	PidsMax int64  `json:"pids_max,omitempty"`
	PidsCap string `json:"pids_cap,omitempty"`
}

// UsageReporter is a provider that can say what a home's processes use.
type UsageReporter interface {
	// Usage returns what home id uses now; ok is false when the provider
	// cannot tell (no cgroup per home, or the home has none).
	Usage(id string) (u Usage, ok bool)
}

// ContainmentReporter is a provider that runs homes on this machine and
// can say how it finds every process a home starts.
type ContainmentReporter interface {
	// Containment is the mode and why it was chosen; mode is "" for
	// the process group alone.
	Containment() (mode, why string)
}

// UserIsolation is a provider that runs homes on this machine and can say
// whether each runs as a user of its own.
type UserIsolation interface {
	// SharedUser is "" when every home runs as a user of its own, else
	// why homes share the gateway's user.
	SharedUser() string
	// ProgramClosed is "" when the home of s can run its program, else
	// the program's path and the parts of it (folders, the file) that the
	// home's own user cannot pass or run: the start would fail with
	// "permission denied".
	ProgramClosed(s Spec) (program, closed string)
}
