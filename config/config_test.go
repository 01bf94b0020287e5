package config_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/config"
	"github.com/wakegate/wakegate/provider/all"
)

// unsetEnv removes name from the environment for the rest of the test.
func unsetEnv(t *testing.T, name string) {
	t.Helper()
	t.Setenv(name, "") // restores the old value when the test ends
	if err := os.Unsetenv(name); err != nil {
		t.Fatal(err)
	}
}

func loadDefault(t *testing.T) *config.Config {
	t.Helper()
	unsetEnv(t, "WAKEGATE_LISTEN")
	unsetEnv(t, "WAKEGATE_DATA_DIR")
	data, err := os.ReadFile("../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := all.Load("config.yaml", data)
	if err != nil {
		t.Fatalf("the default config does not load:\n%v", err)
	}
	return cfg
}

func TestDefaultConfigLoads(t *testing.T) {
	cfg := loadDefault(t)
	if cfg.Listen != "127.0.0.1:8080" || cfg.DataDir != "./data" {
		t.Errorf("listen, data_dir = %q, %q; want 127.0.0.1:8080, ./data", cfg.Listen, cfg.DataDir)
	}
	if len(cfg.Homes) != 1 || cfg.Homes[0].ID != "demo" || cfg.Homes[0].Target != "demo" || cfg.Homes[0].Provider != "exec" {
		t.Errorf("homes = %+v; want the demo home on exec", cfg.Homes)
	}
	if len(cfg.Apps) != 1 || cfg.Apps[0].Slug != "demo" || cfg.Apps[0].Home != "demo" || cfg.Apps[0].Kind != "ui" {
		t.Errorf("apps = %+v; want the demo ui app in the demo home", cfg.Apps)
	}
	if cfg.Server.MaxHeaderBytes != 64<<10 || cfg.Server.MaxBodyBytes != 32<<20 {
		t.Errorf("max_header_bytes, max_body_bytes = %d, %d", cfg.Server.MaxHeaderBytes, cfg.Server.MaxBodyBytes)
	}
	if cfg.Wake.IdleTimeout != 5*time.Minute || cfg.Homes[0].IdleTimeout != 5*time.Minute {
		t.Errorf("idle timeouts = %s, %s; want 5m", cfg.Wake.IdleTimeout, cfg.Homes[0].IdleTimeout)
	}
	if len(cfg.Exec.Command) < 2 || cfg.Exec.Command[0] != "{self}" || cfg.Exec.Command[1] != "demo-home" {
		t.Errorf("exec.command = %q; want the built-in demo home", cfg.Exec.Command)
	}
}

// wantMarks returns what the "# want FIELD" comments of a config expect:
// each field with the line its comment is on.
func wantMarks(t *testing.T, text string) map[string]int {
	t.Helper()
	want := map[string]int{}
	for i, line := range strings.Split(text, "\n") {
		if _, mark, ok := strings.Cut(line, "# want "); ok {
			for _, f := range strings.Fields(mark) {
				want[f] = i + 1
			}
		}
	}
	return want
}

// configErrors loads text and returns its errors, failing if it loads.
func configErrors(t *testing.T, name, text string) config.ConfigErrors {
	t.Helper()
	cfg, err := all.Load(name, []byte(text))
	if err == nil {
		t.Fatalf("config loaded (%+v); want errors", cfg)
	}
	var ce config.ConfigErrors
	if !errors.As(err, &ce) {
		t.Fatalf("error %T %v; want ConfigErrors", err, err)
	}
	return ce
}

// checkMarks asserts that the errors are exactly the marked fields, each on
// its line, and that each message names file:line and field.
func checkMarks(t *testing.T, name, text string) {
	t.Helper()
	want := wantMarks(t, text)
	errs := configErrors(t, name, text)
	got := map[string]int{}
	for _, e := range errs {
		if e.File != name {
			t.Errorf("error %q names file %q; want %q", e, e.File, name)
		}
		if prefix := fmt.Sprintf("%s:%d: %s: ", name, e.Line, e.Field); !strings.HasPrefix(e.Error(), prefix) {
			t.Errorf("error %q does not start with %q", e, prefix)
		}
		if e.Field == "" || e.Line == 0 {
			t.Errorf("error %q lacks its field or line", e)
		}
		if l, dup := got[e.Field]; dup && l != e.Line {
			t.Errorf("field %s reported on lines %d and %d", e.Field, l, e.Line)
		}
		got[e.Field] = e.Line
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors by field and line:\n got %v\nwant %v\nall:\n%v", got, want, errs)
	}
	for i := 1; i < len(errs); i++ {
		if errs[i].Line < errs[i-1].Line {
			t.Errorf("errors not in line order:\n%v", errs)
			break
		}
	}
	if s := errs.Error(); strings.Count(s, "\n") != len(errs)-1 {
		t.Errorf("ConfigErrors.Error() is not one line per error:\n%s", s)
	}
}

func TestConfigReportsEveryErrorWithFileLineAndField(t *testing.T) {
	unsetEnv(t, "WG_TEST_UNSET_TOKEN")
	checkMarks(t, "bad.yaml", `listen: "no-port"                  # want listen
log:
  format: xml                       # want log.format
  level: loud                       # want log.level
server:
  read_header_timeout: -1s          # want server.read_header_timeout
  idle_timeout: soon                # want server.idle_timeout
  max_header_bytes: 10              # want server.max_header_bytes
  max_body_bytes: 12XB              # want server.max_body_bytes
  http1_server: nginx               # want server.http1_server
  trusted_proxies: ["10.0.0.0/8", "192.0.2.1", "bogus"] # want server.trusted_proxies[2]
  websocket_origins:
    - "https://ok.example"
    - "*"
    - "no origin"                   # want server.websocket_origins[2]
proxy:
  dial_timout: 5s                   # want proxy.dial_timout
  max_idle_conns_per_host: -1       # want proxy.max_idle_conns_per_host
wake:
  max_concurrent: -2                # want wake.max_concurrent
  hold: -1s                         # want wake.hold
  failure_backoff: 1m
  failure_backoff_max: 30s          # want wake.failure_backoff_max
  no_wake_user_agents: ["(unclosed"] # want wake.no_wake_user_agents[0]
  no_wake_paths: ["robots.txt"]     # want wake.no_wake_paths[0]
  probe:
    kind: udp                       # want wake.probe.kind
exec:
  command: [""]                     # want exec.command
homes:
  - id: Bad_ID                      # want homes[0].id
  - id: h2
    relay_token: env:WG_TEST_UNSET_TOKEN # want homes[1].relay_token
  - id: h2                          # want homes[2].id
    target: other
    provider: lambda                # want homes[2].provider
apps:
  - slug: a
    upstream: "ftp://x"             # want apps[0].upstream
  - slug: b                         # want apps[1].upstream
    kind: web                       # want apps[1].kind
  - slug: c
    home: nope                      # want apps[2].home
  - slug: a                         # want apps[3].slug
    home: h2                        # want apps[3].home
    upstream: "http://127.0.0.1:1"
`)
}

func TestConfigExecIsolationChecked(t *testing.T) {
	checkMarks(t, "isolation.yaml", `listen: "127.0.0.1:0"
exec:
  inherit_env: [LANG_OK, "NOT=A NAME"] # want exec.inherit_env[1]
  users:
    mode: sometimes                   # want exec.users.mode
    range: "65519-61184"              # want exec.users.range
`)
	checkMarks(t, "range.yaml", `listen: "127.0.0.1:0"
exec:
  users: {range: "0-100"}             # want exec.users.range
`)
}

func TestConfigUnknownFields(t *testing.T) {
	checkMarks(t, "unknown.yaml", `listen: "127.0.0.1:0"
wake:
  probe:
    kind: ws
    kindd: ws       # want wake.probe.kindd
homes:
  - id: h1
    idle_timeot: 1m # want homes[0].idle_timeot
colour: blue        # want colour
`)
}

func TestConfigBadValueInFlowMappingStillLocated(t *testing.T) {
	errs := configErrors(t, "flow.yaml", "listen: \"127.0.0.1:0\"\nserver: {idle_timeout: x, drain_grace: y}\n")
	if len(errs) != 2 {
		t.Fatalf("errors = %v; want one per bad duration", errs)
	}
	for _, e := range errs {
		if e.Line != 2 || !strings.HasPrefix(e.Error(), "flow.yaml:2: ") {
			t.Errorf("error %q not at flow.yaml:2", e)
		}
	}
	errs = configErrors(t, "kind.yaml", "listen: \"127.0.0.1:0\"\nserver: [1]\n")
	if len(errs) != 1 || errs[0].Line != 2 || errs[0].Field != "server" {
		t.Errorf("errors = %#v; want one at line 2 naming server", errs)
	}
	errs = configErrors(t, "list.yaml", "- listen\n")
	if len(errs) != 1 || errs[0].Line != 1 {
		t.Errorf("errors = %v; want one at line 1", errs)
	}
}

// TestConfigTypeMismatchInPlainWords: a value of the wrong kind is named
// in the file's terms (a list, a mapping, a number), never by the YAML
// library's tags or the gateway's Go types.
func TestConfigTypeMismatchInPlainWords(t *testing.T) {
	for name, c := range map[string]struct{ yaml, field, want string }{
		"mapping for a list":     {"access:\n  policies:\n    users:\n      type: jwt\n", "access.policies", `want a list (an item per line, each after "- ", or [a, b]), got a mapping`},
		"list for a section":     {"server: [1]\n", "server", "want a mapping of settings (key: value, indented below it), got a list"},
		"text for a number":      {"proxy:\n  max_idle_conns_per_host: lots\n", "proxy.max_idle_conns_per_host", `want a whole number, got "lots"`},
		"list for one value":     {"listen: [a, b]\n", "listen", "want one value, got a list"},
		"block list for a value": {"listen:\n  - a\n", "listen", "want one value, got a list"},
		"text for true/false":    {"exec:\n  socket_activation: maybe\n", "exec.socket_activation", `want true or false, got "maybe"`},
	} {
		errs := configErrors(t, "kinds.yaml", c.yaml)
		if len(errs) == 0 {
			t.Errorf("%s: no error", name)
			continue
		}
		msg := errs[0].Error()
		if !strings.Contains(msg, c.want) || strings.Contains(msg, "!!") || strings.Contains(msg, "unmarshal") || strings.Contains(msg, "config.") {
			t.Errorf("%s: %q, want %q and no YAML tag or Go type", name, msg, c.want)
		}
		if errs[0].Field != c.field {
			t.Errorf("%s: the error names %q, want the field that holds the value, %q", name, errs[0].Field, c.field)
		}
	}
}

func TestConfigSyntaxErrorHasLine(t *testing.T) {
	errs := configErrors(t, "syntax.yaml", "listen: \"127.0.0.1:0\"\nserver:\n  idle_timeout: [1s\n")
	if len(errs) != 1 || errs[0].Line == 0 || !strings.HasPrefix(errs[0].Error(), fmt.Sprintf("syntax.yaml:%d: ", errs[0].Line)) {
		t.Errorf("errors = %v; want one naming syntax.yaml:line", errs)
	}
	errs = configErrors(t, "dup.yaml", "listen: \"127.0.0.1:0\"\nlisten: \"127.0.0.1:1\"\n")
	if len(errs) != 1 || errs[0].Line != 2 || errs[0].Field != "listen" {
		t.Errorf("errors = %#v; want one at dup.yaml:2 naming listen", errs)
	}
}

func TestConfigEnvExpansion(t *testing.T) {
	t.Setenv("WG_TEST_HOST", "127.0.0.1")
	t.Setenv("WG_TEST_PORT", "18080")
	t.Setenv("WG_TEST_CONC", "7")
	t.Setenv("WG_TEST_EMPTY", "")
	t.Setenv("WG_TEST_DIR", "/tmp/wg-a")
	unsetEnv(t, "WG_TEST_UNSET")
	cfg, err := all.Load("env.yaml", []byte(`listen: "${WG_TEST_HOST}:${WG_TEST_PORT}"
data_dir: ${WG_TEST_DIR:-/never}
instance: "${WG_TEST_UNSET:-inst-1}"
log:
  level: ${WG_TEST_EMPTY:-warn}
server:
  read_header_timeout: ${WG_TEST_UNSET:-300ms}
  max_body_bytes: ${WG_TEST_UNSET:-2MiB}
wake:
  max_concurrent: ${WG_TEST_CONC}
exec:
  env: ["A=${WG_TEST_EMPTY}", "C=${WG_TEST_UNSET:-}"]
`))
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"listen", cfg.Listen, "127.0.0.1:18080"},
		{"data_dir (set var wins over default)", cfg.DataDir, "/tmp/wg-a"},
		{"instance (unset var takes default)", cfg.Instance, "inst-1"},
		{"log.level (empty var takes default)", cfg.Log.Level, "warn"},
		{"server.read_header_timeout", cfg.Server.ReadHeaderTimeout, 300 * time.Millisecond},
		{"server.max_body_bytes", cfg.Server.MaxBodyBytes, config.ByteSize(2 << 20)},
		{"wake.max_concurrent (plain scalar typed after expansion)", cfg.Wake.MaxConcurrent, 7},
		{"exec.env", cfg.Exec.Env, []string{"A=", "C="}},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %#v; want %#v", c.name, c.got, c.want)
		}
	}
}

func TestConfigUnsetEnvIsAnErrorWithLine(t *testing.T) {
	unsetEnv(t, "WG_TEST_UNSET")
	unsetEnv(t, "WG_TEST_UNSET2")
	errs := configErrors(t, "env.yaml", `listen: "127.0.0.1:0"
log:
  level: info
homes:
  - id: h1
    version: "${WG_TEST_UNSET}"
apps:
  - slug: a
    upstream: "http://${WG_TEST_UNSET2}:80/"
`)
	want := []struct {
		line  int
		field string
		name  string
	}{{6, "homes[0].version", "WG_TEST_UNSET"}, {9, "apps[0].upstream", "WG_TEST_UNSET2"}}
	if len(errs) < len(want) {
		t.Fatalf("errors = %v; want at least %d", errs, len(want))
	}
	for i, w := range want {
		e := errs[i]
		if e.Line != w.line || e.Field != w.field || !strings.Contains(e.Msg, w.name) {
			t.Errorf("error %d = %#v; want line %d, field %s, naming %s", i, e, w.line, w.field, w.name)
		}
	}
}

func TestParseByteSize(t *testing.T) {
	good := []struct {
		in   string
		want int64
	}{
		{"0", 0}, {"1024", 1024}, {"7B", 7}, {"64KiB", 64 << 10}, {"3MiB", 3 << 20}, {"2GiB", 2 << 30},
		{"5KB", 5000}, {"10MB", 10_000_000}, {"1GB", 1_000_000_000}, {" 5 KiB ", 5 << 10},
		{strconv.FormatInt(math.MaxInt64/1024, 10) + "KiB", math.MaxInt64 / 1024 * 1024},
	}
	for _, c := range good {
		got, err := config.ParseByteSize(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"", "KiB", "-1", "-1KiB", "1.5MiB", "10kb", "10 TiB", "ten", "9223372036854775807KiB", "9999999999GiB"} {
		if got, err := config.ParseByteSize(in); err == nil {
			t.Errorf("ParseByteSize(%q) = %d; want an error", in, got)
		} else if !strings.Contains(err.Error(), strconv.Quote(in)) {
			t.Errorf("ParseByteSize(%q) error %q does not quote the input", in, err)
		}
	}
}

func TestConfigSizesAndDurations(t *testing.T) {
	cfg, err := all.Load("units.yaml", []byte(`listen: "127.0.0.1:0"
server:
  read_header_timeout: 300ms
  idle_timeout: 1m30s
  max_header_bytes: 4096
  max_body_bytes: 1MB
exec:
  log_max_bytes: 512KiB
proxy:
  max_conns_per_home: 0
wake:
  hold: 0s
  idle_timeout: 0s
`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Server.ReadHeaderTimeout != 300*time.Millisecond || cfg.Server.IdleTimeout != 90*time.Second {
		t.Errorf("durations = %s, %s", cfg.Server.ReadHeaderTimeout, cfg.Server.IdleTimeout)
	}
	if cfg.Server.MaxHeaderBytes != 4096 || cfg.Server.MaxBodyBytes != 1_000_000 || cfg.Exec.LogMaxBytes != 512<<10 {
		t.Errorf("sizes = %d, %d, %d", cfg.Server.MaxHeaderBytes, cfg.Server.MaxBodyBytes, cfg.Exec.LogMaxBytes)
	}
	// An explicit zero stays zero where zero has a meaning.
	if cfg.Wake.Hold != 0 || cfg.Wake.IdleTimeout != 0 || cfg.Proxy.MaxConnsPerHome != 0 {
		t.Errorf("wake.hold, wake.idle_timeout, proxy.max_conns_per_home = %s, %s, %d; want 0, 0, 0",
			cfg.Wake.Hold, cfg.Wake.IdleTimeout, cfg.Proxy.MaxConnsPerHome)
	}
	// A bare number has no unit: refused rather than guessed.
	errs := configErrors(t, "bare.yaml", "listen: \"127.0.0.1:0\"\nserver:\n  drain_grace: 20\n")
	if len(errs) != 1 || errs[0].Line != 3 || errs[0].Field != "server.drain_grace" {
		t.Errorf("errors = %v; want one at line 3 naming server.drain_grace", errs)
	}
}

func TestConfigOverridesBeatDefaults(t *testing.T) {
	cfg, err := all.Load("set.yaml", []byte(`listen: "127.0.0.1:0"
log:
  access: false
wake:
  idle_timeout: 2m
homes:
  - id: h1
    idle_timeout: 30s
  - id: h2
`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Log.Access {
		t.Error("log.access: false was turned back on")
	}
	if cfg.Homes[0].IdleTimeout != 30*time.Second || cfg.Homes[1].IdleTimeout != 2*time.Minute {
		t.Errorf("home idle timeouts = %s, %s; want 30s (own), 2m (wake.idle_timeout)",
			cfg.Homes[0].IdleTimeout, cfg.Homes[1].IdleTimeout)
	}
}

// TestConfigSections checks each section's own rules: every case is a
// config whose "# want FIELD" marks name exactly the errors it must give,
// each on its line.
func TestConfigSections(t *testing.T) {
	unsetEnv(t, "WG_TEST_UNSET_ADMIN")
	for _, tc := range []struct{ name, text string }{
		{"top", `listen: "8080"                     # want listen
`},
		{"log", `log:
  format: yaml                      # want log.format
  level: chatty                     # want log.level
`},
		{"server", `server:
  drain_delay: -1s                  # want server.drain_delay
  drain_grace: -2s                  # want server.drain_grace
  max_header_bytes: 1000            # want server.max_header_bytes
  trusted_proxies: ["::1", "10.1.0.0/16", "x"] # want server.trusted_proxies[2]
  websocket_origins: ["*", "https://ok.example", "https://a.example/path"] # want server.websocket_origins[2]
`},
		{"proxy", `proxy:
  dial_timeout: -1ms                # want proxy.dial_timeout
  response_header_timeout: 5        # want proxy.response_header_timeout
  max_idle_conns_per_host: -3       # want proxy.max_idle_conns_per_host
  max_conns_per_home: -1            # want proxy.max_conns_per_home
`},
		{"wake", `wake:
  warm_ttl: -1s                     # want wake.warm_ttl
  idle_timeout: -5m                 # want wake.idle_timeout
  max_concurrent: -1                # want wake.max_concurrent
  no_wake_paths: ["/ok", "nope"]    # want wake.no_wake_paths[1]
`},
		{"wake.probe", `wake:
  probe:
    kind: icmp                      # want wake.probe.kind
    port_watch: -2ms                # want wake.probe.port_watch
    settle: soon                    # want wake.probe.settle
`},
		{"exec", `exec:
  command: ["", "x"]                # want exec.command
  restart_budget: -1                # want exec.restart_budget
  stop_grace: -1s                   # want exec.stop_grace
`},
		{"admin", `admin:
  listen: "nowhere"                 # want admin.listen
  tokens:
    - "short"                       # want admin.tokens[0]
    - "env:WG_TEST_UNSET_ADMIN"     # want admin.tokens[1]
    - "a-token-long-enough-to-pass"
  auth_failures_per_minute: -1      # want admin.auth_failures_per_minute
`},
		{"roll", `roll:
  mode: sometimes                   # want roll.mode
  idle_after: -1m                   # want roll.idle_after
  target:                           # want roll.target.version
    command: [""]                   # want roll.target.command
`},
		{"homes", `homes:
  - id: a                           # want homes[0].endpoint
    provider: static
  - id: b
    endpoint: http://127.0.0.1:1/   # want homes[1].endpoint
    probe: grpc                     # want homes[1].probe
    idle_timeout: -1s               # want homes[1].idle_timeout
  - id: c
    target: a                       # want homes[2].target
  - id: c                           # want homes[3].id
`},
		{"apps", `homes:
  - id: h
apps:
  - slug: a
    home: h
    health: {timeout: -1s}          # want apps[0].health.timeout
    refresh_timeout: never          # want apps[0].refresh_timeout
  - slug: b
    upstream: http://127.0.0.1:1/
    home: h                         # want apps[1].home
  - slug: a                         # want apps[2].slug apps[2].upstream
    failure_threshold: -1           # want apps[2].failure_threshold
    generation: 3                   # want apps[2].generation
`},
	} {
		t.Run(tc.name, func(t *testing.T) { checkMarks(t, tc.name+".yaml", tc.text) })
	}
}

// TestConfigDefaults checks each default, filled once at load, and that a
// field whose zero means something else keeps its zero.
func TestConfigDefaults(t *testing.T) {
	cfg, err := all.Load("empty.yaml", []byte("homes:\n  - id: h\napps:\n  - slug: a\n    home: h\n"))
	if err != nil {
		t.Fatal(err)
	}
	zero, err := all.Load("zero.yaml", []byte(`log: {access: false}
server: {min_body_rate: 0, min_response_rate: 0}
wake:
  hold: 0
  idle_timeout: 0s
  probe: {port_watch: 0}
  no_wake_paths: []
admin: {listen: ""}
homes:
  - id: h
    idle_timeout: 0
`))
	if err != nil {
		t.Fatal(err)
	}
	h, a := cfg.Homes[0], cfg.Apps[0]
	host, _ := os.Hostname()
	for _, c := range []struct {
		field     string
		got, want any
	}{
		{"listen", cfg.Listen, "127.0.0.1:8080"},
		{"instance", cfg.Instance, fmt.Sprintf("%s-%d", host, os.Getpid())},
		{"server.trusted_proxies", len(cfg.Server.TrustedProxies), 0},
		{"exec.suspend_signal", cfg.Exec.SuspendSignal, false},
		{"apps[0].strip_prefix", a.StripPrefix, false},
		{"data_dir", cfg.DataDir, "./data"},
		{"log.format", cfg.Log.Format, "text"},
		{"log.level", cfg.Log.Level, "info"},
		{"log.access", cfg.Log.Access, true},
		{"server.read_header_timeout", cfg.Server.ReadHeaderTimeout, 10 * time.Second},
		{"server.idle_timeout", cfg.Server.IdleTimeout, 120 * time.Second},
		{"server.max_header_bytes", cfg.Server.MaxHeaderBytes, config.ByteSize(64 << 10)},
		{"server.max_body_bytes", cfg.Server.MaxBodyBytes, config.ByteSize(32 << 20)},
		{"server.drain_grace", cfg.Server.DrainGrace, 20 * time.Second},
		{"server.drain_delay", cfg.Server.DrainDelay, time.Duration(0)},
		{"server.drain_websockets", cfg.Server.DrainWebSockets, "start"},
		{"server.min_body_rate", cfg.Server.MinBodyRate, config.ByteSize(240)},
		{"server.min_response_rate", cfg.Server.MinResponseRate, config.ByteSize(240)},
		{"server.min_rate_grace", cfg.Server.MinRateGrace, 5 * time.Second},
		{"server.max_conns_per_client", cfg.Server.MaxConnsPerClient, 1024},
		{"proxy.dial_timeout", cfg.Proxy.DialTimeout, 5 * time.Second},
		{"proxy.response_header_timeout", cfg.Proxy.ResponseHeaderTimeout, 60 * time.Second},
		{"proxy.home_response_header_timeout", cfg.Proxy.HomeResponseHeaderTimeout, 30 * time.Second},
		{"proxy.max_idle_conns_per_host", cfg.Proxy.MaxIdleConnsPerHost, 256},
		{"proxy.max_conns_per_home", cfg.Proxy.MaxConnsPerHome, 256},
		{"proxy.idle_conn_timeout", cfg.Proxy.IdleConnTimeout, 90 * time.Second},
		{"proxy.relay_header", cfg.Proxy.RelayHeader, "X-Wakegate-Relay"},
		{"wake.warm_ttl", cfg.Wake.WarmTTL, 10 * time.Second},
		{"wake.ready_timeout", cfg.Wake.ReadyTimeout, 30 * time.Second},
		{"wake.wake_timeout", cfg.Wake.WakeTimeout, 60 * time.Second},
		{"wake.hold", cfg.Wake.Hold, time.Second},
		{"wake.idle_timeout", cfg.Wake.IdleTimeout, 5 * time.Minute},
		{"wake.max_concurrent", cfg.Wake.MaxConcurrent, 16},
		{"wake.retry_after", cfg.Wake.RetryAfter, 5 * time.Second},
		{"wake.failure_backoff", cfg.Wake.FailureBackoff, 2 * time.Second},
		{"wake.failure_backoff_max", cfg.Wake.FailureBackoffMax, 5 * time.Minute},
		{"wake.no_wake_user_agents", cfg.Wake.NoWakeUserAgents, config.DefaultNoWakeUserAgents},
		{"wake.no_wake_paths", cfg.Wake.NoWakePaths, []string{"/favicon.ico", "/robots.txt"}},
		{"wake.probe.kind", cfg.Wake.Probe.Kind, "auto"},
		{"wake.probe.path", cfg.Wake.Probe.Path, "/node/{target}/"},
		{"wake.probe.attempt_timeout", cfg.Wake.Probe.AttemptTimeout, 2 * time.Second},
		{"wake.probe.settle", cfg.Wake.Probe.Settle, 300 * time.Millisecond},
		{"wake.probe.min_pause", cfg.Wake.Probe.MinPause, 2 * time.Millisecond},
		{"wake.probe.max_pause", cfg.Wake.Probe.MaxPause, 100 * time.Millisecond},
		{"wake.probe.port_watch", cfg.Wake.Probe.PortWatch, 2 * time.Millisecond},
		{"exec.command", cfg.Exec.Command, []string{"{self}", "demo-home", "--addr", "127.0.0.1:{port}", "--target", "{target}", "--version", "{version}"}},
		{"exec.stop_grace", cfg.Exec.StopGrace, 5 * time.Second},
		{"exec.log_max_bytes", cfg.Exec.LogMaxBytes, config.ByteSize(1 << 20)},
		{"exec.restart_budget", cfg.Exec.RestartBudget, 3},
		{"exec.restart_window", cfg.Exec.RestartWindow, time.Minute},
		{"admin.listen", cfg.Admin.Listen, "127.0.0.1:8081"},
		{"admin.auth_failures_per_minute", cfg.Admin.AuthFailures, 10},
		{"roll.mode", cfg.Roll.Mode, "lazy"},
		{"roll.idle_after", cfg.Roll.IdleAfter, time.Minute},
		{"homes[0].target", h.Target, "h"},
		{"homes[0].provider", h.Provider, "exec"},
		{"homes[0].version", h.Version, "1"},
		{"homes[0].probe", h.Probe.Kind, "auto"},
		{"homes[0].idle_timeout", h.IdleTimeout, 5 * time.Minute},
		{"apps[0].kind", a.Kind, "ui"},
		{"apps[0].desired_state", a.DesiredState, "running"},
		{"apps[0].failure_threshold", a.FailureThreshold, 3},
		{"apps[0].min_refresh", a.MinRefresh.Duration(), time.Second},
		{"apps[0].refresh_timeout", a.RefreshTimeout.Duration(), 30 * time.Second},
		{"apps[0].health.type", a.Health.Type, "http"},
		{"apps[0].health.path", a.Health.Path, "/"},
		{"apps[0].health.interval", a.Health.Interval.Duration(), 2 * time.Second},
		{"apps[0].health.timeout", a.Health.Timeout.Duration(), 2 * time.Second},
		{"apps[0].health.start_period", a.Health.StartPeriod.Duration(), time.Duration(0)},
		// A zero that means something other than the default stays zero.
		{"zero log.access", zero.Log.Access, false},
		{"zero wake.hold", zero.Wake.Hold, time.Duration(0)},
		{"zero server.min_body_rate", zero.Server.MinBodyRate, config.ByteSize(0)},
		{"zero server.min_response_rate", zero.Server.MinResponseRate, config.ByteSize(0)},
		{"zero wake.idle_timeout", zero.Wake.IdleTimeout, time.Duration(0)},
		{"zero wake.probe.port_watch", zero.Wake.Probe.PortWatch, time.Duration(0)},
		{"zero wake.no_wake_paths", len(zero.Wake.NoWakePaths), 0},
		{"zero admin.listen", zero.Admin.Listen, ""},
		{"zero homes[0].idle_timeout", zero.Homes[0].IdleTimeout, time.Duration(0)},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %#v; want %#v", c.field, c.got, c.want)
		}
	}
}

// A short admin token taken from the environment is named by where it came
// from, never shown.
func TestShortEnvTokenNamesItsSource(t *testing.T) {
	const tok = "tok1764547"
	t.Setenv(config.TokenEnv, tok)
	_, err := all.Load("wakegate.yaml", []byte("listen: 127.0.0.1:18080\n"))
	if err == nil {
		t.Fatal("a 10-character token from the environment was accepted")
	}
	msg := err.Error()
	for _, want := range []string{"admin.tokens[0]", "env:" + config.TokenEnv, "10 characters", "openssl rand -hex 16"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, tok) {
		t.Errorf("error %q shows the token", msg)
	}
}

// A public_url that is not a base URL is refused at load with its line.
func TestConfigPublicURL(t *testing.T) {
	checkMarks(t, "bad.yaml", `listen: ":0"
public_url: "ftp://gw.example"   # want public_url
`)
	checkMarks(t, "bad.yaml", `public_url: "https://gw.example/base?x=1"   # want public_url
`)
}

// A home's socket_activation, unset, is exec.socket_activation's, and only
// one the home set reaches its provider settings; gc_headroom and
// admin.socket say whether they were left to their defaults.
func TestUnsetResolvedAtLoad(t *testing.T) {
	cfg, err := all.Load("u.yaml", []byte(`exec:
  socket_activation: true
server:
  gc_headroom: 0
homes:
  - id: a
  - id: b
    socket_activation: false
`))
	if err != nil {
		t.Fatal(err)
	}
	a, b := cfg.Homes[0], cfg.Homes[1]
	if !a.SocketActivation || b.SocketActivation {
		t.Errorf("socket_activation: a %v (want exec's true), b %v (want its own false)", a.SocketActivation, b.SocketActivation)
	}
	for _, c := range []struct {
		h    config.HomeConfig
		want string
	}{{a, ""}, {b, `{"socket_activation":false}`}} {
		d, err := c.h.Decl()
		if err != nil {
			t.Fatal(err)
		}
		if got := string(d.Settings.Options); got != c.want {
			t.Errorf("home %s options = %q; want %q", c.h.ID, got, c.want)
		}
	}
	if cfg.Server.GCHeadroomDefaulted() || cfg.Server.GCHeadroom != 0 {
		t.Errorf("gc_headroom: 0 set: defaulted %v, value %d", cfg.Server.GCHeadroomDefaulted(), cfg.Server.GCHeadroom)
	}
	if !cfg.Admin.SocketDefaulted() || cfg.Admin.Socket == "" {
		t.Errorf("admin.socket unset: defaulted %v, path %q", cfg.Admin.SocketDefaulted(), cfg.Admin.Socket)
	}
	unset, err := all.Load("u.yaml", []byte("listen: 127.0.0.1:0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !unset.Server.GCHeadroomDefaulted() {
		t.Error("gc_headroom unset is not told apart from 0")
	}
}

// TestUnknownFieldSuggestsTheNearOne: an unknown key that is a slip of one
// field (a letter missing, dashes for underscores, another case) names
// that field; one that is a field of another mapping names where it
// belongs; one that is neither suggests nothing.
func TestUnknownFieldSuggestsTheNearOne(t *testing.T) {
	errs := configErrors(t, "near.yaml", `listen: "127.0.0.1:0"
homes:
  - id: h1
    comand: ["/bin/true"]
    idle-timeout: 1m
    Probe: {kind: http}
    xyzzy: 1
    strip_prefix: true
apps:
  - slug: a
    home: h1
    stripprefix: true
wake:
  ws_timeout: 1s
`)
	want := map[string]string{
		"homes[0].comand":       `did you mean "command"?`,
		"homes[0].idle-timeout": `did you mean "idle_timeout"?`,
		"homes[0].Probe":        `did you mean "probe"?`,
		"homes[0].xyzzy":        "",
		"apps[0].stripprefix":   `did you mean "strip_prefix"?`,
		"homes[0].strip_prefix": "it is a field of apps[]",
		"wake.ws_timeout":       "it is a field of wake.probe",
	}
	for _, e := range errs {
		hint, ok := want[e.Field]
		if !ok {
			t.Errorf("unexpected error %q", e)
			continue
		}
		delete(want, e.Field)
		if hint == "" && e.Msg != "unknown field" || !strings.Contains(e.Msg, hint) {
			t.Errorf("%s: %q; want the suggestion %q", e.Field, e.Msg, hint)
		}
	}
	for f := range want {
		t.Errorf("no error for %s", f)
	}
}
