// Package execprov is the exec provider: each home is a process of the
// gateway's machine, started from a command template on a loopback port or
// a socket, with its own folder, capped log and identity record. The
// directory is provider/exec; the package is named execprov
// because its files drive os/exec, which a package named exec would shadow
// for them and for every caller that uses both.
//
// DESIGN rules that live here: 17 (never a signal by pid alone: package procid),
// 18 (the restart budget of the supervisor), 19 (stop marks the home not
// wanted before any signal), the local half of 20 (quiesce at shutdown,
// adoption of homes that still run: quiesce.go), 29 (everything a home
// starts is the home: a cgroup per home or the gateway as subreaper,
// contain.go, package cgroup, subreaper.go) and 31's local part (a clean
// environment, env.go; a user per home, users.go and package homeuser; a home's output reaches
// operators only as escaped excerpts, package homelog). A home's memory and CPU
// limits (limits.go, package cgroup) live in the cgroup of rule 29.
package execprov
