// Package homeuser gives each exec home a user of its own: the uid table
// of a gateway (DataDir/exec/users.json), the machine-wide registry that
// keeps every gateway of the machine from handing out one uid twice, the
// layout under the machine folder (home folders other users can reach, a
// copy of {self} they can run), and the hand-over of a home's folder to
// its uid. The exec provider (package execprov) decides when to use it.
//
// DESIGN rules that live here: 34's user half (a root gateway never runs
// a home as root unless the config says so; per-home uids are unique on
// the machine: registry.go; where that cannot be arranged, every home is
// refused and the reason said: SetUp) and 31's "runs as its own user"
// (a home's folder is its uid's alone, 0700: PrepareFolder).
package homeuser
