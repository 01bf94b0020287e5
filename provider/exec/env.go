package execprov

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// Variables the exec provider defines for every home (and its version
// command), besides PATH, HOME, TMPDIR and the locale.
const (
	// EnvPort is the loopback port the home must listen on ({port}); not
	// set for a home on a Unix socket.
	EnvPort = "WAKEGATE_PORT"
	// EnvSocket is the Unix socket the home must listen on ({socket}); set
	// only for a home whose command names {socket}.
	EnvSocket = "WAKEGATE_SOCKET"
	// EnvTarget is the name in /node/{target} that routes to the home.
	EnvTarget = "WAKEGATE_TARGET"
	// EnvVersion is the version the home was started to run.
	EnvVersion = "WAKEGATE_VERSION"
	// EnvHome is the home's id.
	EnvHome = "WAKEGATE_HOME"
	// EnvRelayToken is the home's own relay token, set only when the home
	// has one: what the gateway sends it in the relay header.
	EnvRelayToken = "WAKEGATE_RELAY_TOKEN"
)

// defaultPath is a home's PATH when the gateway's own is empty.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// envName is what inherit_env accepts: a portable variable name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// checkInheritEnv checks the names of Config.InheritEnv.
func checkInheritEnv(names []string) error {
	for _, n := range names {
		if !envName.MatchString(n) {
			return fmt.Errorf("inherit_env entry %q is not a variable name", n)
		}
	}
	return nil
}

// homeEnv is the whole environment of a process the provider runs for h
// (the home itself or its version command), built from nothing: the
// gateway's own environment holds its secrets (the admin token, JWT
// secrets, other homes' relay tokens, cloud tokens), and a home runs other
// people's code. It holds, later entries winning: PATH (the gateway's, or
// defaultPath), HOME (the home's folder), TMPDIR, the locale (LANG,
// LANGUAGE, LC_*) and TZ, the WAKEGATE_* variables of the home, the
// variables named in InheritEnv as the gateway has them, Config.Env
// and the home's own env.
func (e *Provider) homeEnv(h *home, l listenAt, sp runSpec) []string {
	env := make([]string, 0, 16+len(e.cfg.InheritEnv)+len(e.cfg.Env)+len(sp.env))
	path := os.Getenv("PATH")
	if path == "" {
		path = defaultPath
	}
	env = append(env, "PATH="+path, "HOME="+h.dir, "TMPDIR="+e.tmpDir(h))
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "LANG" || k == "LANGUAGE" || k == "TZ" || strings.HasPrefix(k, "LC_") {
			env = append(env, kv)
		}
	}
	if l.socket != "" {
		env = append(env, EnvSocket+"="+l.socket)
	} else {
		env = append(env, EnvPort+"="+strconv.Itoa(l.port))
	}
	env = append(env,
		EnvTarget+"="+sp.target,
		EnvVersion+"="+sp.version,
		EnvHome+"="+h.id,
	)
	if sp.relayToken != "" {
		env = append(env, EnvRelayToken+"="+sp.relayToken)
	}
	for _, n := range e.cfg.InheritEnv {
		if v, ok := os.LookupEnv(n); ok {
			env = append(env, n+"="+v)
		}
	}
	env = append(env, e.cfg.Env...)
	return append(env, sp.env...)
}
