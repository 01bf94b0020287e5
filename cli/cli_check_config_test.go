package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckConfigWarnsOpenAdmin checks check-config accepts an admin
// listener on every interface (the container recipe) with a warning, and
// says nothing of a loopback one.
func TestCheckConfigWarnsOpenAdmin(t *testing.T) {
	for listen, warn := range map[string]bool{":8081": true, "0.0.0.0:8081": true, "127.0.0.1:8081": false} {
		errs := checkConfigWarnings(t, listen, "admin:\n  listen: \""+listen+"\"\n  tokens: [\"check-config-token-0123456789\"]\n")
		if got := strings.Contains(errs, "warning: admin.listen"); got != warn {
			t.Errorf("admin.listen %s: warned %t, want %t\n%s", listen, got, warn, errs)
		}
	}
}

// checkHomeWarnings runs check-config on a config with one exec home,
// files, whose settings are home (YAML at the home's indent), and returns
// its warnings (checkConfigWarnings).
func checkHomeWarnings(t *testing.T, name, home string) string {
	t.Helper()
	return checkConfigWarnings(t, name, "homes:\n  - id: files\n    "+home+"\n")
}

// checkConfigWarnings runs check-config on a config of body after a
// data_dir of its own, expects exit 0, and returns what it wrote to
// stderr (its warnings).
func checkConfigWarnings(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.yaml")
	cfg := "data_dir: " + filepath.Dir(p) + "\n" + body
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errs bytes.Buffer
	if code := run([]string{"check-config", "--config", p}, &out, &errs); code != 0 {
		t.Fatalf("%s: exit %d\n%s%s", name, code, out.String(), errs.String())
	}
	return errs.String()
}

// TestCheckConfigWarnsHomeWithoutPort checks check-config warns of an exec
// home whose command can never listen where the gateway looks (no {port},
// no {socket}, no socket activation), naming the home and both fixes, and
// says nothing of homes that can.
func TestCheckConfigWarnsHomeWithoutPort(t *testing.T) {
	for name, c := range map[string]struct {
		home string
		warn bool
	}{
		"no port":           {`command: ["python3", "-m", "http.server"]`, true},
		"port":              {`command: ["python3", "-m", "http.server", "{port}"]`, false},
		"socket":            {`command: ["srv", "--unix", "{socket}"]`, false},
		"env in a shell":    {`command: ["/bin/sh", "-c", "exec srv --port $WAKEGATE_PORT"]`, false},
		"socket activation": {"command: [\"python3\", \"-m\", \"http.server\"]\n    socket_activation: true", false},
		"option":            {"command: [\"python3\", \"-m\", \"http.server\"]\n    options: {socket_activation: true}", false},
	} {
		errs := checkHomeWarnings(t, name, c.home)
		got := strings.Contains(errs, "warning: home files: its command names neither {port} nor {socket}")
		if got != c.warn {
			t.Errorf("%s: warned %t, want %t\n%s", name, got, c.warn, errs)
		}
		if got && (!strings.Contains(errs, "put {port} in the command") || !strings.Contains(errs, "socket_activation: true")) {
			t.Errorf("%s: the warning does not name both fixes:\n%s", name, errs)
		}
	}
}

// TestCheckConfigWarnsPrefixedHealthPath checks check-config warns of an
// app without strip_prefix whose health.path starts with its own prefix,
// which its checks put before health.path already, naming the path they
// would ask for and the one to write; and says nothing where the prefix
// is not repeated, where strip_prefix is on, or for a tcp check.
func TestCheckConfigWarnsPrefixedHealthPath(t *testing.T) {
	for name, c := range map[string]struct {
		app  string
		warn string // "": no warning
	}{
		"prefix repeated": {"health: {path: /apps/web/healthz}",
			"warning: app web: health.path /apps/web/healthz starts with the app's prefix /apps/web"},
		"the prefix alone":    {"health: {path: /apps/web}", "they ask for /apps/web/apps/web; write the path after the prefix, health.path: /"},
		"after the prefix":    {"health: {path: /healthz}", ""},
		"another app's path":  {"health: {path: /apps/webby/}", ""},
		"strip_prefix":        {"strip_prefix: true\n    health: {path: /apps/web/healthz}", ""},
		"tcp check":           {"health: {type: tcp, path: /apps/web/}", ""},
		"default health path": {"kind: ui", ""},
	} {
		errs := checkConfigWarnings(t, name, "apps:\n  - slug: web\n    upstream: http://127.0.0.1:9\n    "+c.app+"\n")
		got := strings.Contains(errs, "warning: app web: health.path")
		if got != (c.warn != "") || c.warn != "" && !strings.Contains(errs, c.warn) {
			t.Errorf("%s: want warning %q, got:\n%s", name, c.warn, errs)
		}
	}
}

// TestCheckConfigWarnsMissingProgram checks check-config warns of an exec
// home whose program cannot be started (missing, a folder, not
// executable, not on PATH), naming the home, the program and why, and
// says nothing of programs that can, of placeholders, or of a path in
// the home's own folder.
func TestCheckConfigWarnsMissingProgram(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		program string
		why     string // "" for no warning
	}{
		"missing":       {filepath.Join(dir, "nope"), "does not exist"},
		"folder":        {dir, "is a folder"},
		"no x bit":      {plain, "is not executable"},
		"not on PATH":   {"no-such-program-3f9a", "is not on the gateway's PATH"},
		"on PATH":       {"sh", ""},
		"absolute":      {"/bin/sh", ""},
		"placeholder":   {"{self}", ""},
		"home's folder": {"./run.sh", ""},
	} {
		errs := checkHomeWarnings(t, name, `command: ["`+c.program+`", "{port}"]`)
		want := "warning: home files: its command starts " + c.program + ", which " + c.why
		got := strings.Contains(errs, "its command starts")
		if got != (c.why != "") || (got && !strings.Contains(errs, want)) {
			t.Errorf("%s: stderr %q, want a warning %t (%q)", name, errs, c.why != "", want)
		}
	}
}

// TestCheckConfigRefusesActivatedSocketHome: socket activation hands a
// home a TCP socket, which a home on {socket} has no use for.
func TestCheckConfigRefusesActivatedSocketHome(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.yaml")
	cfg := "data_dir: " + filepath.Dir(p) + "\nhomes:\n  - id: chat\n    socket_activation: true\n" +
		"    command: [\"srv\", \"--unix\", \"{socket}\"]\n"
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errs bytes.Buffer
	if code := run([]string{"check-config", "--config", p}, &out, &errs); code != 1 || !strings.Contains(errs.String(), "homes[0].socket_activation") {
		t.Fatalf("exit %d, want 1 naming homes[0].socket_activation\n%s%s", code, out.String(), errs.String())
	}
}

// TestCheckConfigWarnsEmptyConfig checks check-config warns of a file that
// sets nothing (empty, blank or only comments), which would run on
// defaults alone and remove every home and app at a reload, and says
// nothing of a file that sets something.
func TestCheckConfigWarnsEmptyConfig(t *testing.T) {
	for name, c := range map[string]struct {
		text string
		warn bool
	}{
		"empty":    {"", true},
		"blank":    {"\n  \n", true},
		"comments": {"# homes go here\n", true},
		"mapping":  {"{}\n", true},
		"listen":   {"listen: 127.0.0.1:18080\n", false},
	} {
		p := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(p, []byte(c.text), 0o600); err != nil {
			t.Fatal(err)
		}
		var out, errs bytes.Buffer
		if code := run([]string{"check-config", "--config", p}, &out, &errs); code != 0 {
			t.Fatalf("%s: exit %d\n%s%s", name, code, out.String(), errs.String())
		}
		got := strings.Contains(errs.String(), "warning: "+p+" sets nothing")
		if got != c.warn {
			t.Errorf("%s: warned %t, want %t\n%s", name, got, c.warn, errs.String())
		}
		if got && !strings.Contains(errs.String(), "--allow-remove-all") {
			t.Errorf("%s: the warning does not say what a reload of it does\n%s", name, errs.String())
		}
	}
}

// TestCheckConfigWarnsTrustedProxyHomesReach checks check-config warns
// when server.trusted_proxies covers an address an exec home can connect
// from (loopback, an address of this machine): such a home could send
// X-Forwarded-For and spend another client's budget. A proxy elsewhere,
// or no exec home, gets no warning.
func TestCheckConfigWarnsTrustedProxyHomesReach(t *testing.T) {
	const home = "homes:\n  - id: files\n    command: [\"/bin/sleep\", \"600\", \"{port}\"]\n"
	for _, c := range []struct {
		name, body string
		warn       bool
	}{
		{"loopback with an exec home", "server:\n  trusted_proxies: [127.0.0.1]\n" + home, true},
		{"all of v6 loopback", "server:\n  trusted_proxies: [\"::1/128\"]\n" + home, true},
		{"everything", "server:\n  trusted_proxies: [0.0.0.0/0]\n" + home, true},
		{"a proxy elsewhere", "server:\n  trusted_proxies: [192.0.2.10]\n" + home, false},
		{"loopback, no exec home", "server:\n  trusted_proxies: [127.0.0.1]\n", false},
	} {
		errs := checkConfigWarnings(t, c.name, c.body)
		if got := strings.Contains(errs, "server.trusted_proxies"); got != c.warn {
			t.Errorf("%s: warned %t, want %t\n%s", c.name, got, c.warn, errs)
		}
	}
}

// TestCheckConfigWarnsHomeUserCannotRun: run as root (as serve would be),
// check-config warns of an exec home whose program the home's own user
// cannot run (under a folder closed to other users, as a shim under
// /root is), naming the home, the program, what is closed and the fixes,
// as serve does; and of exec homes that run as root because
// exec.users.mode is off.
func TestCheckConfigWarnsHomeUserCannotRun(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only a root gateway gives homes users of their own")
	}
	dir := filepath.Join(t.TempDir(), "root-only")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	shim := filepath.Join(dir, "python3")
	if err := os.WriteFile(shim, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	errs := checkHomeWarnings(t, "closed", `command: ["`+shim+`", "{port}"]`)
	for _, want := range []string{"warning: home files: its program " + shim, "closed to the home's own user",
		dir + " is closed", "chmod o+x", "exec.users.mode off"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
	if errs := checkHomeWarnings(t, "open", `command: ["/bin/sh", "-c", "exec x {port}"]`); strings.Contains(errs, "closed to the home's own user") {
		t.Errorf("a program every user may run is warned of:\n%s", errs)
	}
	errs = checkConfigWarnings(t, "off", "exec:\n  users: {mode: \"off\"}\nhomes:\n  - id: files\n    command: [\"/bin/sh\", \"-c\", \"exec x {port}\"]\n")
	if !strings.Contains(errs, "exec.users.mode is off: a gateway run as root runs its exec homes (files) as root") {
		t.Errorf("check-config with exec.users.mode off as root:\n%s", errs)
	}
}
