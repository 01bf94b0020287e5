package cli

import (
	"bytes"
	"fmt"
	"net"
	"strings"
	"testing"
)

// TestHelpExitsZero: --help (and -h) on every command prints its usage
// to stdout and exits 0, without doing anything else.
func TestHelpExitsZero(t *testing.T) {
	cases := []struct {
		args []string
		want []string // in stdout
	}{
		{[]string{"serve", "--help"}, []string{"usage: wakegate serve", "-reset-store"}},
		{[]string{"serve", "--config", "x.yaml", "-h"}, []string{"usage: wakegate serve", "-listen"}},
		{[]string{"check-config", "--help"}, []string{"usage: wakegate check-config", "-config"}},
		{[]string{"version", "--help"}, []string{"usage: wakegate version"}},
		{[]string{"demo-home", "--help"}, []string{"usage: wakegate demo-home", "-boot-delay"}},
		{[]string{"status", "--help"}, []string{"usage: wakegate status", "-json", "-token"}},
		{[]string{"home", "--help"}, []string{"usage: wakegate home", "-if-match"}},
		{[]string{"home", "wake", "--help"}, []string{"usage: wakegate home", "-admin"}},
		{[]string{"home", "put", "x", "--help"}, []string{"usage: wakegate home", "-file"}},
		{[]string{"app", "--help"}, []string{"usage: wakegate app", "-force"}},
		{[]string{"app", "start", "--help"}, []string{"usage: wakegate app", "-wait"}},
		{[]string{"target", "--help"}, []string{"usage: wakegate target"}},
		{[]string{"logs", "--help"}, []string{"usage: wakegate logs", "-follow"}},
		{[]string{"store", "--help"}, []string{"usage: wakegate store", "-file"}},
		{[]string{"store", "backup", "--help"}, []string{"usage: wakegate store", "-admin"}},
		{[]string{"tls", "--help"}, []string{"usage: wakegate tls root", "-config"}},
		{[]string{"tls", "root", "-help"}, []string{"usage: wakegate tls root"}},
		{[]string{"reload", "--help"}, []string{"usage: wakegate reload", "applies", "-admin"}},
		{[]string{"healthcheck", "--help"}, []string{"usage: wakegate healthcheck", "exits 0", "-path"}},
		{[]string{"help"}, []string{"usage: wakegate <command>"}},
		{[]string{"--help"}, []string{"usage: wakegate <command>"}},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(c.args, &out, &errb); code != 0 {
				t.Fatalf("exit %d, want 0; stderr:\n%s", code, errb.String())
			}
			for _, w := range c.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

// TestEveryCommandHasHelp: every command the top-level usage lists has a
// usage of its own that says what it does.
func TestEveryCommandHasHelp(t *testing.T) {
	listed := strings.SplitN(usage, "commands:", 2)
	if len(listed) != 2 {
		t.Fatalf("the usage lists no commands:\n%s", usage)
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimLeft(listed[1], "\n"), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			break // the end of the list
		}
		if len(f) < 2 || !strings.HasPrefix(line, "  ") || strings.HasPrefix(line, "   ") {
			continue
		}
		seen++
		text, ok := commandUsage[f[0]]
		if !ok || !strings.Contains(text, "\n\n") {
			t.Errorf("command %s has no usage with a description", f[0])
		}
	}
	if seen < 10 {
		t.Errorf("read %d commands from the usage, want them all:\n%s", seen, usage)
	}
}

// TestStatusWithoutAdminSaysHowToTurnItOn: `wakegate status` with no
// token, or with nothing listening at the admin address, says how the
// admin listener is turned on.
func TestStatusWithoutAdminSaysHowToTurnItOn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	_ = ln.Close()
	cases := map[string][]string{
		"no token":        {"status", "--admin", closed},
		"nothing listens": {"status", "--admin", closed, "--token", "0123456789abcdef0123"},
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			t.Setenv("WAKEGATE_TOKEN", "")
			var out, errb bytes.Buffer
			code := run(args, &out, &errb)
			if code == 0 {
				t.Fatalf("exit 0 without an admin listener")
			}
			for _, w := range []string{"admin.tokens", "WAKEGATE_TOKEN", "admin.listen"} {
				if !strings.Contains(errb.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, errb.String())
				}
			}
			if name == "nothing listens" && !strings.Contains(errb.String(), fmt.Sprintf("no admin listener answered at http://%s", closed)) {
				t.Errorf("stderr does not name the address:\n%s", errb.String())
			}
		})
	}
}
