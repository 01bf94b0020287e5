package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/internal/testbin"
)

// TestAdminCommandsFindTheGatewayByItsConfig runs a real gateway and
// reaches its admin API with --config alone, from a folder that holds no
// data: through the admin socket the config's data_dir holds, also when
// the file does not load in the CLI's environment (a secret the gateway's
// environment holds); then, for a config whose socket nobody serves,
// through its admin listener and the token the config names. A config
// with neither is a gateway that does not answer (exit 3), with an error
// that names the socket looked for and what to do.
func TestAdminCommandsFindTheGatewayByItsConfig(t *testing.T) {
	const token = "config-client-token-0123456789"
	admin := fmt.Sprintf("127.0.0.1:%d", testbin.FreePort(t))
	gw := testbin.Serve(t, fmt.Sprintf(`
instance: by-config
listen: "%%ADDR%%"
data_dir: "%%DATA%%"
admin:
  listen: %q
  tokens: [%q]
`, admin, token))
	t.Setenv("WAKEGATE_ADMIN", "")
	t.Setenv("WAKEGATE_TOKEN", "")
	t.Setenv("WAKEGATE_DATA_DIR", "")
	t.Chdir(t.TempDir())

	status := func(cfg string) (int, string) {
		var out, errb bytes.Buffer
		code := run([]string{"status", "--config", cfg}, &out, &errb)
		return code, out.String() + errb.String()
	}
	if code, out := status(filepath.Join(gw.Cmd.Dir, "config.yaml")); code != 0 || !strings.Contains(out, "instance by-config") {
		t.Errorf("status --config of the running gateway (its socket): exit %d\n%s", code, out)
	}

	elsewhere := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(elsewhere, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	byListener := write("listener.yaml", fmt.Sprintf("data_dir: %q\nadmin:\n  listen: %q\n  tokens: [%q]\n",
		filepath.Join(elsewhere, "data"), admin, token))
	if code, out := status(byListener); code != 0 || !strings.Contains(out, "instance by-config") {
		t.Errorf("status --config naming the admin listener and its token: exit %d\n%s", code, out)
	}

	// The gateway's secrets are in its environment, not the CLI's: the
	// file does not load here, and its socket still serves.
	secrets := write("secrets.yaml", fmt.Sprintf("data_dir: %q\nhomes:\n  - id: h1\n    command: [/bin/true]\n"+
		"    relay_token: env:WG_CONFIG_CLIENT_UNSET\n", filepath.Join(gw.Cmd.Dir, "data")))
	if code, out := status(secrets); code != 0 || !strings.Contains(out, "instance by-config") {
		t.Errorf("status --config of a file whose secrets are not set here: exit %d\n%s", code, out)
	}

	neither := write("neither.yaml", "data_dir: nowhere\nadmin:\n  listen: \"\"\n")
	code, out := status(neither)
	if code != statusNoAnswer || !strings.Contains(out, filepath.Join("nowhere", "admin.sock")) ||
		!strings.Contains(out, "admin.listen is off") || !strings.Contains(out, "hint: ") {
		t.Errorf("status --config with no socket and no listener: exit %d, want %d (no answer) naming the socket, "+
			"the listener and a hint\n%s", code, statusNoAnswer, out)
	}
}
