// Package cgroup is the kernel's side of the exec provider's containment:
// the cgroup v2 of a gateway's homes (Root) and what a cgroup holds,
// kills and removes, and the limits of a home's memory, CPU and processes
// (Support), in its cgroup v2, the cgroup v1 hierarchies of a hybrid
// machine, or, for the process cap alone, RLIMIT_NPROC (CapNproc). The
// exec provider (package execprov) decides which home runs in which
// cgroup.
//
// DESIGN rules that live here: 29's cgroup half (everything a home starts
// is in its cgroup, which cgroup.kill ends: Open, Kill, ProcsTree) and
// 34's process cap (every home has one: Support.Apply, CapNproc).
package cgroup
