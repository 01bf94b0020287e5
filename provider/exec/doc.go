// Package execprov is the exec provider: each home is a process of the
// gateway's machine, started from a command template on a loopback port or
// a socket, with its own folder, capped log and identity record. The
// directory is provider/exec; the package is named execprov
// because its files drive os/exec, which a package named exec would shadow
// for them and for every caller that uses both.
//
// One file per job: config.go (Config, its defaults and their check),
// provider.go (New, Close, the provider's memory of its homes), verbs.go
// (Wake, Suspend, Stop, Recreate, Status), version.go, spawn.go (a start,
// as its steps), listen.go (port or socket), watch.go (a process until it
// is gone), signal.go (signals, stops, resumes), supervise.go (restarts
// and the log janitor), ref.go (the recorded process and adoption),
// groups.go (a group of processes as one home: each member a home of
// this provider, run by package members).
//
// DESIGN rules that live here: 17 (never a signal by pid alone: package
// procid, signal.go, ref.go), 18 (the restart budget: supervise.go), 19
// (stop marks the home not wanted before any signal: verbs.go), the local
// half of 20 (quiesce at shutdown, adoption of homes that still run:
// quiesce.go, ref.go), 29 (everything a home starts is the home: a cgroup
// per home or the gateway as subreaper, contain.go, package cgroup,
// subreaper.go, package orphans; for a group of processes, every member:
// groups.go, package members), 31's local part (a clean environment,
// env.go; a user per home, users.go and package homeuser; a home's output
// reaches operators only as escaped excerpts, package homelog) and 34 (no
// root, no stray descriptor, a process cap: spawn.go, fds.go,
// activate.go, packages homeuser and cgroup). A home's memory and CPU
// limits (limits.go, package cgroup) live in the cgroup of rule 29.
package execprov
