package execprov

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/wakegate/wakegate/provider/exec/homeuser"
)

// exitCause explains a home's exit status 126 or 127, which a shell (or
// env, or a version manager's shim) returns when it could not run a
// program: it names the program the home's command runs, and, for a
// `sh -c` command, the first program of its script, with what was wrong
// with each as the home's user sees it: not found on the PATH the home
// gets, not executable, or closed to the home's own user. "" for any other
// status. The operator's log, the failure reason and a wake's error then
// carry the cause, not only the home's last log lines.
func (e *Provider) exitCause(h *home, p *proc, code int) string {
	if code != 126 && code != 127 {
		return ""
	}
	path := e.homePath(p.spec)
	var found []string
	for _, prog := range programsOf(p.spec.command, e.self) {
		if why := e.programProblem(h, prog, path); why != "" {
			found = append(found, why)
		}
	}
	what := "a command the home ran was not found on the PATH the home sees (" + path + ")"
	if code == 126 {
		what = "a command the home ran was found but could not be run (permission denied, or not executable)"
		if p.spec.user == "" && e.users != nil {
			what += " by the home's own user"
		}
	}
	if len(found) > 0 {
		what += ": " + strings.Join(found, "; ")
	}
	return fmt.Sprintf("exit status %d: %s", code, what)
}

// homePath is the PATH a home started from sp gets (homeEnv): its own
// env's, else exec.env's, else the gateway's.
func (e *Provider) homePath(sp runSpec) string {
	path := ""
	for _, kv := range append(append([]string(nil), e.cfg.Env...), sp.env...) {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	if path == "" {
		path = os.Getenv("PATH")
	}
	if path == "" {
		path = defaultPath
	}
	return path
}

// programsOf are the programs a command template runs first: its
// program, and the first word of a `sh -c` script (after `exec` and
// variable assignments).
func programsOf(cmd []string, self string) []string {
	if len(cmd) == 0 {
		return nil
	}
	out := []string{strings.ReplaceAll(cmd[0], "{self}", self)}
	switch filepath.Base(cmd[0]) {
	case "sh", "bash", "dash", "zsh":
	default:
		return out
	}
	for i := 1; i+1 < len(cmd); i++ {
		if cmd[i] != "-c" && cmd[i] != "-ec" && cmd[i] != "-ce" {
			continue
		}
		for _, w := range strings.Fields(cmd[i+1]) {
			if w == "exec" || (strings.Contains(w, "=") && !strings.HasPrefix(w, "=")) {
				continue
			}
			if !strings.ContainsAny(w, "{}$;&|<>()'\"`") {
				out = append(out, w)
			}
			break
		}
	}
	return out
}

// programProblem says what is wrong with program prog for home h, whose
// PATH is path; "" when nothing is found wrong.
func (e *Provider) programProblem(h *home, prog, path string) string {
	full := prog
	if !strings.Contains(prog, "/") {
		full = ""
		for _, dir := range filepath.SplitList(path) {
			if dir == "" {
				continue
			}
			if st, err := os.Stat(filepath.Join(dir, prog)); err == nil && !st.IsDir() {
				full = filepath.Join(dir, prog)
				break
			}
		}
		if full == "" {
			return fmt.Sprintf("%s is not found on the PATH the home sees (%s)", prog, path)
		}
	} else if !filepath.IsAbs(full) {
		full = filepath.Join(h.dir, full)
	}
	st, err := os.Stat(full)
	switch {
	case err != nil:
		return fmt.Sprintf("%s does not exist", full)
	case st.IsDir():
		return fmt.Sprintf("%s is a folder", full)
	case st.Mode().Perm()&0o111 == 0:
		return fmt.Sprintf("%s is not executable (no x bit): chmod +x %s", full, full)
	}
	if e.users != nil {
		if c := homeuser.ClosedToOthers(full, true); c != "" {
			return fmt.Sprintf("%s is closed to the home's own user (%s closed to other users): name a program every user "+
				"may run (such as /usr/bin/python3 rather than a shim under /root), chmod o+rx what is closed, or set "+
				"exec.users.mode off", full, c)
		}
	}
	return ""
}
