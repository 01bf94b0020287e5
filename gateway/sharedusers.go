package gateway

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/route"
)

// hideFromOwnUser makes the gateway's process not dumpable: its
// /proc/<pid>/environ, mem, maps and fds then belong to root, and no
// process of its own user can ptrace it. A home that runs as the gateway's
// user (not root, or exec.users off) could otherwise read the gateway's
// environment (its admin token, JWT secrets, relay tokens) there. It also
// means no core dump.
func hideFromOwnUser() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl PR_SET_DUMPABLE: %w", err)
	}
	return nil
}

// sharedUser says why this gateway's exec homes run as its own user ("" when
// each has a user of its own, or no exec provider was built) and how many
// exec homes it serves.
func (g *Gateway) sharedUser() (why string, homes int) {
	iso, ok := g.providers["exec"].(provider.UserIsolation)
	if !ok {
		return "", 0
	}
	g.eachHome(func(hr *route.Home) bool {
		if hr.Spec().Provider == "exec" {
			homes++
		}
		return true
	})
	return iso.SharedUser(), homes
}

// sharedUserMatters says whether n exec homes that share the gateway's
// user for the reason why deserve a warning: two or more can reach each
// other; a single one matters under a root gateway, where it runs as
// root: that happens only when the operator chose it (exec.users.mode
// off), and is said every time (design rule 34).
func sharedUserMatters(why string, n int) bool {
	return why != "" && (n >= 2 || (n == 1 && os.Geteuid() == 0))
}

// refusedHomes says why this root gateway refuses every exec home ("" when
// it does not): it could not give them users of their own.
func (g *Gateway) refusedHomes() string {
	r, ok := g.providers["exec"].(interface{ RefusedHomes() string })
	if !ok {
		return ""
	}
	return r.RefusedHomes()
}

// sharedUserWarning is the one warning of status about exec homes that
// are refused, or that share the gateway's user (sharedUserMatters): each
// can then reach the others and the gateway's files, and under a root
// gateway it is root. "" otherwise.
func (g *Gateway) sharedUserWarning() string {
	why, n := g.sharedUser()
	homes := "homes run"
	if n == 1 {
		homes = "home runs"
	}
	switch {
	case n > 0 && g.refusedHomes() != "":
		return fmt.Sprintf("every exec home is refused (%d declared): the gateway runs as root, could not give homes "+
			"users of their own, and never runs one as root unless exec.users.mode is off: %s", n, g.refusedHomes())
	case !sharedUserMatters(why, n):
		return ""
	case os.Geteuid() == 0:
		return fmt.Sprintf("%d exec %s as root because %s: each can do anything root can on this machine "+
			"(read the store and secret files, signal or replace the gateway); set exec.users.mode auto to give each "+
			"home a user of its own", n, homes, why)
	}
	return fmt.Sprintf("%d exec %s as the gateway's user (uid %d) because %s: each can read what that user can "+
		"(data_dir/state.db, secret files, the other homes' folders and logs) and signal the gateway; "+
		"run the gateway as root with exec.users.mode auto to give each home a user of its own, or run homes in containers",
		n, homes, os.Geteuid(), why)
}

// logSharedUser says at start, once, that exec homes are refused, run as
// root, or run as the gateway's user (sharedUserMatters), with the cause
// and the ways out: a single home of a gateway that is not root reaching
// the gateway's files is the operator's own, but one running as root is
// not.
func (g *Gateway) logSharedUser() {
	why, n := g.sharedUser()
	switch {
	case n > 0 && g.refusedHomes() != "":
		g.log.Error("exec homes are refused: the gateway runs as root and could not give them users of their own",
			"exec_homes", n, "cause", g.refusedHomes())
	case !sharedUserMatters(why, n):
	case os.Geteuid() == 0:
		g.log.Warn("exec homes run as root: each can do anything root can on this machine",
			"exec_homes", n, "cause", why, "hint", "set exec.users.mode auto to give each home a user of its own")
	default:
		g.log.Warn("exec homes run as the gateway's own user: each can read the gateway's store and secret files, "+
			"the other homes' folders, and signal the gateway",
			"uid", os.Geteuid(), "exec_homes", n, "cause", why,
			"hint", "run the gateway as root with exec.users.mode auto (a user per home), or run homes in containers")
	}
}

// logClosedPrograms says at start, once per home, that an exec home's
// program cannot be run by the home's own user (a program under root's
// home folder, such as a version manager's shim, under a root gateway):
// its first wake would fail with "permission denied".
func (g *Gateway) logClosedPrograms() {
	iso, ok := g.providers["exec"].(provider.UserIsolation)
	if !ok {
		return
	}
	g.eachHome(func(hr *route.Home) bool {
		s := hr.Spec()
		if s.Provider != "exec" {
			return true
		}
		ps := provider.Spec{ID: s.ID, Target: s.Target, Version: s.Version, Command: s.Settings.Command,
			Env: s.Settings.Env, Dir: s.Settings.Dir, Options: s.Settings.Options}
		if program, closed := iso.ProgramClosed(ps); program != "" {
			g.log.Warn("exec home's program is closed to the home's user: its wakes will fail", "home", s.ID,
				"program", program, "closed", closed,
				"hint", "name a program every user may run in the home's command (an absolute path such as /usr/bin/python3), "+
					"chmod o+x what is closed, or set exec.users.mode off to run homes as the gateway's user")
		}
		return true
	})
}
