package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/wakegate/wakegate/registry"
)

// Warnings returns what a valid config serves that an operator may not
// mean: check-config prints each, and the gateway logs each at start.
func (c *Config) Warnings() []string {
	out := c.FileWarnings()
	if len(c.Admin.tokens) > 0 && c.Admin.Listen != "" {
		if w := AdminListenWarning(c.Admin.Listen); w != "" {
			out = append(out, w)
		}
	}
	out = append(out, c.IsolationWarnings()...)
	// The gateway logs these at start with the homes it runs.
	return append(out, c.homeUserWarnings()...)
}

// FileWarnings are the warnings of Warnings that the gateway does not log
// elsewhere: the admin listener's is logged where it opens, and the
// isolation warnings with the homes the gateway routes.
func (c *Config) FileWarnings() []string {
	var out []string
	if c.empty {
		out = append(out, fmt.Sprintf("%s sets nothing: the gateway runs on defaults alone, with no home and no app; "+
			"if the file was emptied by accident, restore it. A reload of it would remove every home and app the "+
			"running config declares, so it is refused unless confirmed (wakegate reload --allow-remove-all)", c.file))
	}
	out = append(out, c.unreachableHomes()...)
	out = append(out, c.prefixedHealthPaths()...)
	out = append(out, c.missingPrograms()...)
	return append(out, c.trustedProxyHomesReach()...)
}

// trustedProxyHomesReach warns when server.trusted_proxies covers an
// address an exec home can connect to the gateway from: loopback, or any
// address of this machine (a process may bind its socket to any of them
// before it connects). Such a home is then a trusted proxy: the
// X-Forwarded-For it sends names the client that limits count, the logs
// name and homes receive, so it can spend another client's rate budget or
// pose as another client. See docs/security-edge.md.
func (c *Config) trustedProxyHomesReach() []string {
	execHomes := false
	for i := range c.Homes {
		execHomes = execHomes || c.Homes[i].Provider == "exec"
	}
	if !execHomes || len(c.Server.trusted) == 0 {
		return nil
	}
	local := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				local = append(local, n.IP)
			}
		}
	}
	var out []string
	for i, n := range c.Server.trusted {
		for _, ip := range local {
			if n.Contains(ip) {
				out = append(out, fmt.Sprintf("server.trusted_proxies[%d] (%s) covers %s, an address this machine's "+
					"exec homes can connect from: a home that sends X-Forwarded-For is then trusted as a proxy and can "+
					"spend another client's rate budget or pose as another client; trust only the address of a proxy "+
					"on another machine or network namespace, or leave trusted_proxies empty "+
					"(docs/security-edge.md)", i, c.Server.TrustedProxies[i], ip))
				break
			}
		}
	}
	return out
}

// homeUserWarnings warns, for a root gateway (check-config run as root,
// as serve would be), of exec homes that run as root because
// exec.users.mode is off, and of each exec home whose program, found on
// the gateway's PATH, the home's own user cannot run (a version manager's
// shim under /root): its wakes would fail with "permission denied". A
// gateway that is not root runs homes as its own user, which may run
// what it may.
func (c *Config) homeUserWarnings() []string {
	if os.Geteuid() != 0 {
		return nil
	}
	var out, off []string
	for i := range c.Homes {
		h := &c.Homes[i]
		if h.Provider != "exec" {
			continue
		}
		if c.Exec.Users.Mode == c.providers.Exec.UsersOff {
			off = append(off, h.ID)
			continue
		}
		if u, _ := h.Options["user"].(string); u != "" {
			continue
		}
		cmd, field := h.Command, fmt.Sprintf("homes[%d].command[0]", i)
		if len(cmd) == 0 {
			cmd, field = c.Exec.Command, "exec.command[0]"
		}
		if len(cmd) == 0 || strings.Contains(cmd[0], "{") {
			continue
		}
		path, err := exec.LookPath(cmd[0])
		if err != nil {
			continue // missingPrograms says so
		}
		if path, err = filepath.Abs(path); err != nil {
			continue
		}
		if closed := c.providers.Exec.ClosedToOthers(path, true); closed != "" {
			out = append(out, fmt.Sprintf("home %s: its program %s (%s) is closed to the home's own user (%s is closed "+
				"to other users), so every wake of the home fails with \"permission denied\"; name a program every user "+
				"may run (an absolute path such as /usr/bin/python3), chmod o+x what is closed, or set exec.users.mode "+
				"off to run homes as root", h.ID, path, field, closed))
		}
	}
	if len(off) > 0 {
		out = append(out, fmt.Sprintf("exec.users.mode is off: a gateway run as root runs its exec homes (%s) as root, "+
			"and each can do anything root can on this machine; set exec.users.mode auto to give each home a user of its own",
			strings.Join(off, ", ")))
	}
	return out
}

// missingPrograms warns of each exec home whose program cannot be found
// where its start will look: an absolute path that is missing or not an
// executable file, or a bare name that is not on the gateway's PATH (a
// home's program is looked up there). A path relative to the home's
// folder and a placeholder ({self}) are left to the wake, which says what
// failed.
func (c *Config) missingPrograms() []string {
	var out []string
	for i := range c.Homes {
		h := &c.Homes[i]
		if h.Provider != "exec" {
			continue
		}
		cmd, whose, field := h.Command, "its command", fmt.Sprintf("homes[%d].command[0]", i)
		if len(cmd) == 0 {
			cmd, whose, field = c.Exec.Command, "exec.command, which it runs,", "exec.command[0]"
		}
		if len(cmd) == 0 || strings.Contains(cmd[0], "{") {
			continue
		}
		if why := programProblem(cmd[0]); why != "" {
			out = append(out, fmt.Sprintf("home %s: %s starts %s, which %s, so every wake of the home fails at its start; "+
				"name the program by an absolute path that exists (%s), or install it",
				h.ID, whose, cmd[0], why, field))
		}
	}
	return out
}

// programProblem says why program cannot be started, or "" when it can
// be (or when only its start can tell).
func programProblem(program string) string {
	switch {
	case filepath.IsAbs(program):
		fi, err := os.Stat(program)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return "does not exist"
		case err != nil:
			return ""
		case fi.IsDir():
			return "is a folder"
		case fi.Mode().Perm()&0o111 == 0:
			return "is not executable (no x bit)"
		}
	case !strings.Contains(program, "/"):
		if _, err := exec.LookPath(program); errors.Is(err, exec.ErrNotFound) {
			return "is not on the gateway's PATH"
		}
	}
	return ""
}

// unreachableHomes warns of each exec home whose command names neither
// {port} nor {socket} (nor their {endpoint} or WAKEGATE_* variables) and
// that has no socket activation: it cannot listen where the gateway
// looks, so each wake would wait for its ready timeout and fail.
func (c *Config) unreachableHomes() []string {
	var out []string
	for i := range c.Homes {
		h := &c.Homes[i]
		if h.Provider != "exec" || c.socketActivated(h) {
			continue
		}
		cmd, whose := h.Command, "its command"
		if len(cmd) == 0 {
			cmd, whose = c.Exec.Command, "exec.command, which it runs,"
		}
		if c.providers.Exec.ListensWhereLooked(cmd) {
			continue
		}
		timeout := c.Wake.ReadyTimeout
		if h.ReadyTimeout > 0 {
			timeout = h.ReadyTimeout
		}
		out = append(out, fmt.Sprintf("home %s: %s names neither {port} nor {socket}, and socket activation is off: "+
			"it cannot listen where the gateway looks, so every wake waits its ready timeout (%s) and fails; "+
			"put {port} in the command where the home takes its port (127.0.0.1:{port}), "+
			"or set socket_activation: true on the home to hand it its listening socket as descriptor 3 "+
			"(a program that reads WAKEGATE_PORT from its environment listens there already: then ignore this)",
			h.ID, whose, timeout))
	}
	return out
}

// prefixedHealthPaths warns of an app without strip_prefix whose
// health.path starts with its own prefix /apps/{slug}: the health check
// and the self-probe both put the prefix before health.path already, so
// they would ask for it twice.
func (c *Config) prefixedHealthPaths() []string {
	var out []string
	for i := range c.Apps {
		a := &c.Apps[i]
		prefix := "/apps/" + a.Slug
		if a.StripPrefix || a.Health.Type == registry.HealthTCP ||
			(a.Health.Path != prefix && !strings.HasPrefix(a.Health.Path, prefix+"/")) {
			continue
		}
		rest := strings.TrimPrefix(a.Health.Path, prefix)
		if rest == "" {
			rest = "/"
		}
		out = append(out, fmt.Sprintf("app %s: health.path %s starts with the app's prefix %s, which its health check "+
			"and self-probe put before health.path already (without strip_prefix the app is forwarded the full path): "+
			"they ask for %s%s; write the path after the prefix, health.path: %s", a.Slug, a.Health.Path, prefix,
			prefix, a.Health.Path, rest))
	}
	return out
}

// socketActivated reports whether exec home h starts with socket
// activation: its own setting (socket_activation, or the option of that
// name), or exec.socket_activation.
func (c *Config) socketActivated(h *HomeConfig) bool {
	if h.socketActivationSet {
		return h.SocketActivation
	}
	if v, ok := h.Options["socket_activation"].(bool); ok {
		return v
	}
	return c.Exec.SocketActivation
}

// AdminListenWarning says what is wrong with an admin listener on listen
// that other machines can reach; "" for a loopback one.
func AdminListenWarning(listen string) string {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return ""
	}
	const fix = "every machine that reaches it may try admin tokens, and with one runs the gateway; " +
		"bind it to 127.0.0.1 (on this machine the CLI uses the admin socket) or keep the port on a private network"
	ip := net.ParseIP(strings.Trim(host, "[]"))
	switch {
	case host == "" || (ip != nil && ip.IsUnspecified()):
		return fmt.Sprintf("admin.listen %q serves the admin API on every interface: %s", listen, fix)
	case strings.EqualFold(host, "localhost") || (ip != nil && ip.IsLoopback()):
		return ""
	}
	return fmt.Sprintf("admin.listen %q is not a loopback address: %s", listen, fix)
}
