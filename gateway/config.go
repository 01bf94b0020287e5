package gateway

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/wakegate/wakegate/registry"
)

// Config is the whole gateway configuration, as read from YAML. Every field
// documents its default, its unit and what zero means; defaults are filled
// once by Load, and the rest of the code never tests for zero again.
type Config struct {
	// Listen is the public listener's address. Default ":8080".
	Listen string `yaml:"listen"`
	// DataDir holds state (the embedded store) and home data and logs.
	// Default "./data". Relative paths are relative to the working directory.
	DataDir string `yaml:"data_dir"`
	// Instance names this gateway in logs and shared state. Default: the
	// host name and the process id.
	Instance string `yaml:"instance"`

	Log    LogConfig    `yaml:"log"`
	Server ServerConfig `yaml:"server"`
	Proxy  ProxyConfig  `yaml:"proxy"`
	Wake   WakeConfig   `yaml:"wake"`
	Exec   ExecConfig   `yaml:"exec"`
	Admin  AdminConfig  `yaml:"admin"`
	Roll   RollConfig   `yaml:"roll"`

	// Homes are the sleepable backends reached at /node/{target}/.
	Homes []HomeConfig `yaml:"homes"`
	// Apps are the services reached at /apps/{slug}/ (registry.App
	// documents each field and its default). Default none.
	Apps []registry.App `yaml:"apps"`

	// file is the config's name for error messages.
	file string
}

// LogConfig configures logging.
type LogConfig struct {
	// Format is "text" or "json". Default "text".
	Format string `yaml:"format"`
	// Level is "debug", "info", "warn" or "error". Default "info".
	Level string `yaml:"level"`
	// Access turns the per-request access log on. Default true; set false
	// to turn it off.
	Access *bool `yaml:"access"`
}

// ServerConfig hardens the public listener.
type ServerConfig struct {
	// ReadHeaderTimeout bounds reading a request's headers. Default 10s.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	// IdleTimeout closes keep-alive connections idle this long. Default 120s.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// MaxHeaderBytes caps the size of request headers (431 past it).
	// Default 64 KiB.
	MaxHeaderBytes ByteSize `yaml:"max_header_bytes"`
	// MaxBodyBytes caps a request body (413 past it). Default 32 MiB.
	MaxBodyBytes ByteSize `yaml:"max_body_bytes"`
	// DrainGrace is how long shutdown lets in-flight requests and open
	// WebSockets finish before closing them. Default 20s.
	DrainGrace time.Duration `yaml:"drain_grace"`
	// DrainDelay is how long shutdown keeps serving, with /readyz answering
	// 503, before it stops accepting, so that a load balancer polling
	// /readyz moves traffic away first. Default 0s: stop accepting at once.
	DrainDelay time.Duration `yaml:"drain_delay"`
	// TrustedProxies are the CIDRs whose X-Forwarded-* and X-Request-Id
	// headers are trusted. Default none: they are always set afresh.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// WebSocketOrigins are the Origin values (scheme://host[:port]) allowed to
	// open WebSockets, besides the request's own host. Default none: same
	// host only. "*" allows any origin.
	WebSocketOrigins []string `yaml:"websocket_origins"`

	trusted []*net.IPNet
}

// ProxyConfig tunes forwarding to upstreams.
type ProxyConfig struct {
	// DialTimeout bounds connecting to an upstream. Default 5s.
	DialTimeout time.Duration `yaml:"dial_timeout"`
	// ResponseHeaderTimeout bounds waiting for an upstream's response
	// headers (504 past it). Default 60s; zero is not allowed.
	ResponseHeaderTimeout time.Duration `yaml:"response_header_timeout"`
	// MaxIdleConnsPerHost is the keep-alive pool per upstream. Default 256.
	MaxIdleConnsPerHost int `yaml:"max_idle_conns_per_host"`
	// IdleConnTimeout closes pooled upstream connections idle this long.
	// Default 90s.
	IdleConnTimeout time.Duration `yaml:"idle_conn_timeout"`
	// RelayHeader is the header that carries a home's relay token to it.
	// Default "X-Wakegate-Relay".
	RelayHeader string `yaml:"relay_header"`
}

// WakeConfig configures the wake engine.
type WakeConfig struct {
	// WarmTTL is how long a proven wake is trusted with no store read,
	// provider call or probe. Default 10s.
	WarmTTL time.Duration `yaml:"warm_ttl"`
	// ReadyTimeout bounds one wake: provider start plus readiness probe.
	// Default 30s.
	ReadyTimeout time.Duration `yaml:"ready_timeout"`
	// WakeTimeout is how long API, asset and WebSocket callers are held
	// while their home wakes before 503. Default 60s.
	WakeTimeout time.Duration `yaml:"wake_timeout"`
	// Hold is how long a browser navigation waits for a wake before it gets
	// the waiting page instead. Default 1s; zero sends the page at once.
	Hold *time.Duration `yaml:"hold"`
	// IdleTimeout suspends a home that has had no session this long.
	// Default 5m; zero means never.
	IdleTimeout *time.Duration `yaml:"idle_timeout"`
	// MaxConcurrent caps wakes running at once across all homes; callers
	// beyond it wait (bounded by their own timeouts). Default 16.
	MaxConcurrent int `yaml:"max_concurrent"`
	// RetryAfter is the Retry-After value, in whole seconds, sent with 503
	// answers for homes that are not ready. Default 5s.
	RetryAfter time.Duration `yaml:"retry_after"`
	// FailureBackoff is the pause a home's wakes are held to after a failed
	// wake; it doubles with each failure in a row up to 16 times. Default 2s.
	FailureBackoff time.Duration `yaml:"failure_backoff"`
	// NoWakeUserAgents are regular expressions; a request whose User-Agent
	// matches one never wakes a sleeping home. Default: common uptime
	// monitors and crawlers.
	NoWakeUserAgents []string `yaml:"no_wake_user_agents"`
	// NoWakePaths are sub-paths (after /node/{target}) that never wake a
	// sleeping home. Default ["/favicon.ico", "/robots.txt"].
	NoWakePaths []string `yaml:"no_wake_paths"`
	// Probe is how readiness is proven.
	Probe ProbeConfig `yaml:"probe"`

	noWakeUA []*regexp.Regexp
}

// ProbeConfig configures readiness probes.
type ProbeConfig struct {
	// Kind is "ws" (default: a WebSocket upgrade to /node/{target}),
	// "http" or "tcp".
	Kind string `yaml:"kind"`
	// Path is the http probe's path. Default "/node/{target}/".
	Path string `yaml:"path"`
	// AttemptTimeout bounds one probe attempt. Default 2s.
	AttemptTimeout time.Duration `yaml:"attempt_timeout"`
	// Settle is how long a ws probe's socket must stay open when no first
	// frame arrives. Default 100ms.
	Settle time.Duration `yaml:"settle"`
	// MinPause is the first pause between attempts; it doubles up to
	// MaxPause. Default 2ms.
	MinPause time.Duration `yaml:"min_pause"`
	// MaxPause caps the pause between attempts. Default 100ms.
	MaxPause time.Duration `yaml:"max_pause"`
	// PortWatch is how often a home's port is checked during a pause after
	// a refused connection, so the probe runs the moment the home listens.
	// Default 2ms; zero turns the watch off (pauses run their full length).
	PortWatch *time.Duration `yaml:"port_watch"`
}

// ExecConfig configures the exec provider, which runs homes as local
// processes.
type ExecConfig struct {
	// Command is the command template. Placeholders: {port} (a free loopback
	// port), {target}, {version}, {id}, {data_dir} (the home's own folder)
	// and {self} (this gateway's executable). Default: the built-in demo home.
	Command []string `yaml:"command"`
	// StopGrace is the pause between SIGTERM and SIGKILL. Default 5s.
	StopGrace time.Duration `yaml:"stop_grace"`
	// LogMaxBytes caps each home's log file. Default 1 MiB.
	LogMaxBytes ByteSize `yaml:"log_max_bytes"`
	// RestartBudget is how many unexpected exits are restarted per
	// RestartWindow before the home is marked failed. Default 3.
	RestartBudget int `yaml:"restart_budget"`
	// RestartWindow is the window of RestartBudget. Default 60s.
	RestartWindow time.Duration `yaml:"restart_window"`
	// SuspendSignal suspends homes with SIGSTOP (and resumes with SIGCONT)
	// instead of stopping them. Default false.
	SuspendSignal bool `yaml:"suspend_signal"`
	// VersionCommand, if set, is run to learn the version a home really
	// runs; default: GET /version on the home.
	VersionCommand []string `yaml:"version_command"`
	// Env are extra KEY=VALUE entries for homes' environment.
	Env []string `yaml:"env"`
}

// AdminConfig configures the admin listener: the admin API, the dashboard
// and /metrics. It is never served on the public listener.
type AdminConfig struct {
	// Listen is the admin listener's address. Default "127.0.0.1:8081"; an
	// empty string turns the admin listener off. It is also off while
	// Tokens holds no token.
	Listen *string `yaml:"listen"`
	// Tokens are the bearer tokens accepted on every admin route (the
	// dashboard's page itself loads without one): secret references
	// "env:NAME" or "file:PATH", or the token itself. Each must be at least
	// 16 characters. Empty entries are skipped, so "${VAR:-}" turns the
	// listener off while VAR is unset. Default none.
	Tokens []string `yaml:"tokens"`
	// AllowedHosts are extra Host header values (host or host:port) the
	// admin listener answers, besides its own address (and, when it listens
	// on loopback or all interfaces, localhost, 127.0.0.1 and [::1] on its
	// port). Any other Host is refused (DNS rebinding). Default none.
	AllowedHosts []string `yaml:"allowed_hosts"`
	// AuthFailures is how many failed token checks one client IP may make
	// per minute before it gets 429 with Retry-After. Default 10; the burst
	// is the same number.
	AuthFailures int `yaml:"auth_failures_per_minute"`

	tokens []string // resolved, non-empty
}

// RollConfig configures rolls: idle homes moving to the target version.
type RollConfig struct {
	// Mode is "lazy" (default: a stale home rolls at its next wake),
	// "eager" (also awake homes idle for IdleAfter) or "off".
	Mode string `yaml:"mode"`
	// IdleAfter is how long an awake home must have had no session before
	// an eager roll. Default 1m; zero means the default.
	IdleAfter time.Duration `yaml:"idle_after"`
	// Target is the version homes roll onto. Default none: no target is
	// written at start (one set earlier, e.g. through the admin API, is
	// kept). At start it is stored only if it differs from the stored one;
	// a different target lifts the brake of a bad one.
	Target RollTarget `yaml:"target"`
}

// RollTarget is a release homes roll onto.
type RollTarget struct {
	// Version is the target version; homes whose version differs roll to
	// it. Default none (no target). Required when Command or Image is set.
	Version string `yaml:"version"`
	// Command is the exec command template for this version, with the
	// placeholders of exec.command. Default: exec.command.
	Command []string `yaml:"command"`
	// Image is what image-based providers run this version from (stored
	// with the target; the exec provider ignores it). Default none.
	Image string `yaml:"image"`
}

// HomeConfig declares a home.
type HomeConfig struct {
	// ID identifies the home in state and logs. Required; [a-z0-9-_.].
	ID string `yaml:"id"`
	// Target is the name in /node/{target}. Default: the ID.
	Target string `yaml:"target"`
	// Provider runs the home: "exec" (default: a local process from
	// exec.command) or "static" (always on at Endpoint).
	Provider string `yaml:"provider"`
	// Endpoint is the base URL of a static home. Required for static homes,
	// not allowed for others.
	Endpoint string `yaml:"endpoint"`
	// Probe overrides wake.probe.kind for this home: "ws", "http" or "tcp".
	// Default: wake.probe.kind.
	Probe string `yaml:"probe"`
	// Version is the version the home runs when first started. Default "1".
	Version string `yaml:"version"`
	// RelayToken is a secret reference, "env:NAME" or "file:PATH", whose
	// value is sent to this home only, in the relay header. Default none.
	RelayToken string `yaml:"relay_token"`
	// IdleTimeout overrides wake.idle_timeout for this home.
	IdleTimeout *time.Duration `yaml:"idle_timeout"`
}

// ByteSize is a size in bytes; YAML accepts a number or a string with a
// unit: B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024).
type ByteSize int64

// UnmarshalYAML parses a byte size. A bad size is a *yaml.TypeError, so
// decoding goes on and every other problem in the file is reported too.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseByteSize(n.Value)
	if err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %v", n.Line, err)}}
	}
	*b = ByteSize(v)
	return nil
}

// ParseByteSize parses "1024", "64KiB", "10MB" and the like.
func ParseByteSize(in string) (int64, error) {
	s := strings.TrimSpace(in)
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("invalid size %q: want a number of bytes, optionally with KiB, MiB, GiB, KB, MB or GB", in)
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("invalid size %q: too large", in)
	}
	return n * mult, nil
}

// FieldError is one problem in a config file, located by file and line.
type FieldError struct {
	File  string
	Line  int
	Field string
	Msg   string
}

func (e *FieldError) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	if e.Field == "" {
		return fmt.Sprintf("%s: %s", loc, e.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", loc, e.Field, e.Msg)
}

// ConfigErrors is every problem found in a config file.
type ConfigErrors []*FieldError

func (es ConfigErrors) Error() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "\n")
}

// LoadFile reads and validates a config file.
func LoadFile(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Load(path, data)
}

// Load parses, expands, defaults and validates a config. name is used in
// error messages. Errors are ConfigErrors naming file, line and field: every
// unknown field, unset variable, badly typed value and invalid setting in
// the file, in line order.
func Load(name string, data []byte) (*Config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, ConfigErrors{yamlError(name, err)}
	}
	var errs ConfigErrors
	lines := map[string]int{}
	cfg := &Config{file: name}
	if len(root.Content) > 0 {
		doc := root.Content[0]
		if doc.Kind != yaml.MappingNode {
			return nil, ConfigErrors{{File: name, Line: doc.Line, Msg: "want a mapping of settings at the top level"}}
		}
		expandEnv(name, doc, "", &errs)
		indexLines(doc, "", lines)
		checkKnown(name, doc, reflect.TypeOf(cfg).Elem(), "", &errs)
		if err := doc.Decode(cfg); err != nil {
			var te *yaml.TypeError
			if !errors.As(err, &te) {
				// Not a per-value problem: nothing decoded can be trusted.
				return nil, append(errs, yamlErrors(name, err)...)
			}
			errs = append(errs, fieldsByLine(yamlErrors(name, err), lines)...)
		}
	}
	cfg.setDefaults()
	errs = append(errs, cfg.validate(lines)...)
	if len(errs) > 0 {
		sort.SliceStable(errs, func(i, j int) bool { return errs[i].Line < errs[j].Line })
		return nil, errs
	}
	return cfg, nil
}

// fieldsByLine names the field of each decoding error, which yaml.v3
// locates by line only: the deepest field starting on that line, unless two
// unrelated fields share it (a flow mapping), where the message must do.
func fieldsByLine(es ConfigErrors, lines map[string]int) ConfigErrors {
	for _, e := range es {
		if e.Field != "" || e.Line == 0 {
			continue
		}
		var on []string
		for p, l := range lines {
			if l == e.Line {
				on = append(on, p)
			}
		}
		sort.Slice(on, func(i, j int) bool { return len(on[i]) > len(on[j]) })
		if len(on) == 0 {
			continue
		}
		deepest := on[0]
		chain := true
		for _, p := range on[1:] {
			if !strings.HasPrefix(deepest, p+".") && !strings.HasPrefix(deepest, p+"[") {
				chain = false
			}
		}
		if !chain {
			continue
		}
		e.Field = deepest
		if strings.Contains(e.Msg, "!!seq") || strings.Contains(e.Msg, "!!map") {
			// A collection of the wrong kind: the field holding it, not an
			// element of it.
			e.Field = on[len(on)-1]
		}
	}
	return es
}

// checkKnown reports every mapping key that names no field of t, with its
// line: yaml.v3 offers strict decoding only from text, and decoding from
// the node tree is what keeps expanded values on their original lines.
func checkKnown(name string, n *yaml.Node, t reflect.Type, path string, errs *ConfigErrors) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == durationType && n.Kind == yaml.ScalarNode && n.Tag == "!!int" && n.Value == "0" {
		// A bare 0 is a duration of zero; any other number needs a unit.
		n.Value, n.Tag = "0s", "!!str"
	}
	switch {
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Struct:
		fields := map[string]reflect.Type{}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); tag != "" && tag != "-" {
				fields[tag] = f.Type
			}
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			ft, ok := fields[k.Value]
			if !ok {
				*errs = append(*errs, &FieldError{File: name, Line: k.Line, Field: p, Msg: "unknown field"})
				continue
			}
			checkKnown(name, n.Content[i+1], ft, p, errs)
		}
	case n.Kind == yaml.SequenceNode && t.Kind() == reflect.Slice:
		for i, c := range n.Content {
			checkKnown(name, c, t.Elem(), fmt.Sprintf("%s[%d]", path, i), errs)
		}
	}
}

var durationType = reflect.TypeOf(time.Duration(0))

var lineRE = regexp.MustCompile(`line (\d+): (.*)`)

func yamlError(name string, err error) *FieldError {
	if m := lineRE.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &FieldError{File: name, Line: line, Msg: m[2]}
	}
	return &FieldError{File: name, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
}

func yamlErrors(name string, err error) ConfigErrors {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		var out ConfigErrors
		for _, e := range te.Errors {
			out = append(out, yamlError(name, errors.New(e)))
		}
		return out
	}
	return ConfigErrors{yamlError(name, err)}
}

var envRE = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

// expandEnv replaces ${VAR} and ${VAR:-default} in every scalar value under
// n, whose dotted path is path. As in the shell, ${VAR:-default} takes the
// default when VAR is unset or empty, and ${VAR} may be set and empty. An
// unset variable without a default is an error at its line and field.
func expandEnv(name string, n *yaml.Node, path string, errs *ConfigErrors) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := n.Content[i].Value
			if path != "" {
				p = path + "." + p
			}
			expandEnv(name, n.Content[i], path, errs)
			expandEnv(name, n.Content[i+1], p, errs)
		}
		return
	case yaml.SequenceNode:
		for i, c := range n.Content {
			expandEnv(name, c, fmt.Sprintf("%s[%d]", path, i), errs)
		}
		return
	}
	if n.Kind == yaml.ScalarNode && strings.Contains(n.Value, "${") {
		n.Value = envRE.ReplaceAllStringFunc(n.Value, func(m string) string {
			sub := envRE.FindStringSubmatch(m)
			v, ok := os.LookupEnv(sub[1])
			if ok && (v != "" || sub[2] == "") {
				return v
			}
			if sub[2] != "" {
				return sub[3]
			}
			*errs = append(*errs, &FieldError{File: name, Line: n.Line, Field: path, Msg: fmt.Sprintf("environment variable %s is not set", sub[1])})
			return ""
		})
		if n.Style != 0 {
			// Quoted, block or explicitly tagged: it stays as it is.
			return
		}
		// A plain scalar takes the type of its expanded value: the parser
		// resolved "${N}" to a string before N was known.
		n.Tag = ""
	}
	for _, c := range n.Content {
		expandEnv(name, c, path, errs)
	}
}

// indexLines records the line of every field by its dotted path, e.g.
// "wake.warm_ttl" or "homes[0].id".
func indexLines(n *yaml.Node, prefix string, lines map[string]int) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			p := key
			if prefix != "" {
				p = prefix + "." + key
			}
			lines[p] = n.Content[i].Line
			indexLines(n.Content[i+1], p, lines)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", prefix, i)
			lines[p] = c.Line
			indexLines(c, p, lines)
		}
	}
}

func defaultDur(d *time.Duration, v time.Duration) {
	if *d == 0 {
		*d = v
	}
}

func defaultStr(s *string, v string) {
	if *s == "" {
		*s = v
	}
}

func defaultInt(i *int, v int) {
	if *i == 0 {
		*i = v
	}
}

// DefaultNoWakeUserAgents match uptime monitors, link previewers and crawlers.
var DefaultNoWakeUserAgents = []string{
	`(?i)bot\b`, `(?i)crawler`, `(?i)spider`, `(?i)uptime`, `(?i)pingdom`,
	`(?i)statuscake`, `(?i)healthcheck`, `(?i)monitor`, `(?i)slurp`, `(?i)facebookexternalhit`,
}

func (c *Config) setDefaults() {
	defaultStr(&c.Listen, ":8080")
	defaultStr(&c.DataDir, "./data")
	if c.Instance == "" {
		host, _ := os.Hostname()
		c.Instance = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	defaultStr(&c.Log.Format, "text")
	defaultStr(&c.Log.Level, "info")
	if c.Log.Access == nil {
		t := true
		c.Log.Access = &t
	}
	s := &c.Server
	defaultDur(&s.ReadHeaderTimeout, 10*time.Second)
	defaultDur(&s.IdleTimeout, 120*time.Second)
	if s.MaxHeaderBytes == 0 {
		s.MaxHeaderBytes = 64 << 10
	}
	if s.MaxBodyBytes == 0 {
		s.MaxBodyBytes = 32 << 20
	}
	defaultDur(&s.DrainGrace, 20*time.Second)
	p := &c.Proxy
	defaultDur(&p.DialTimeout, 5*time.Second)
	defaultDur(&p.ResponseHeaderTimeout, 60*time.Second)
	defaultInt(&p.MaxIdleConnsPerHost, 256)
	defaultDur(&p.IdleConnTimeout, 90*time.Second)
	defaultStr(&p.RelayHeader, "X-Wakegate-Relay")
	w := &c.Wake
	defaultDur(&w.WarmTTL, 10*time.Second)
	defaultDur(&w.ReadyTimeout, 30*time.Second)
	defaultDur(&w.WakeTimeout, 60*time.Second)
	if w.Hold == nil {
		d := time.Second
		w.Hold = &d
	}
	if w.IdleTimeout == nil {
		d := 5 * time.Minute
		w.IdleTimeout = &d
	}
	defaultInt(&w.MaxConcurrent, 16)
	defaultDur(&w.RetryAfter, 5*time.Second)
	defaultDur(&w.FailureBackoff, 2*time.Second)
	if w.NoWakeUserAgents == nil {
		w.NoWakeUserAgents = DefaultNoWakeUserAgents
	}
	if w.NoWakePaths == nil {
		w.NoWakePaths = []string{"/favicon.ico", "/robots.txt"}
	}
	defaultStr(&w.Probe.Kind, "ws")
	defaultStr(&w.Probe.Path, "/node/{target}/")
	defaultDur(&w.Probe.AttemptTimeout, 2*time.Second)
	defaultDur(&w.Probe.Settle, 100*time.Millisecond)
	defaultDur(&w.Probe.MinPause, 2*time.Millisecond)
	defaultDur(&w.Probe.MaxPause, 100*time.Millisecond)
	if w.Probe.PortWatch == nil {
		d := 2 * time.Millisecond
		w.Probe.PortWatch = &d
	}
	e := &c.Exec
	if len(e.Command) == 0 {
		e.Command = []string{"{self}", "demo-home", "--addr", "127.0.0.1:{port}", "--target", "{target}", "--version", "{version}"}
	}
	defaultDur(&e.StopGrace, 5*time.Second)
	if e.LogMaxBytes == 0 {
		e.LogMaxBytes = 1 << 20
	}
	defaultInt(&e.RestartBudget, 3)
	defaultDur(&e.RestartWindow, 60*time.Second)
	if c.Admin.Listen == nil {
		l := "127.0.0.1:8081"
		c.Admin.Listen = &l
	}
	defaultInt(&c.Admin.AuthFailures, 10)
	defaultStr(&c.Roll.Mode, "lazy")
	defaultDur(&c.Roll.IdleAfter, time.Minute)
	for i := range c.Homes {
		h := &c.Homes[i]
		defaultStr(&h.Target, h.ID)
		defaultStr(&h.Provider, "exec")
		defaultStr(&h.Version, "1")
		defaultStr(&h.Probe, w.Probe.Kind)
		if h.IdleTimeout == nil {
			h.IdleTimeout = w.IdleTimeout
		}
	}
	for i := range c.Apps {
		c.Apps[i].Default() // the same defaults as the admin API's
	}
}

var idRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

func (c *Config) validate(lines map[string]int) ConfigErrors {
	var errs ConfigErrors
	bad := func(field, format string, args ...any) {
		line := lines[field]
		// A defaulted field has no line of its own: point at its parent.
		for p := field; line == 0 && p != ""; {
			if i := strings.LastIndexAny(p, ".["); i > 0 {
				p = p[:i]
			} else {
				p = ""
			}
			line = lines[p]
		}
		errs = append(errs, &FieldError{File: c.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen", "want host:port, got %q", c.Listen)
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		bad("log.format", "want text or json, got %q", c.Log.Format)
	}
	if _, err := ParseLevel(c.Log.Level); err != nil {
		bad("log.level", "%v", err)
	}
	positive := map[string]time.Duration{
		"server.read_header_timeout":    c.Server.ReadHeaderTimeout,
		"server.idle_timeout":           c.Server.IdleTimeout,
		"server.drain_grace":            c.Server.DrainGrace,
		"server.drain_delay":            c.Server.DrainDelay,
		"proxy.dial_timeout":            c.Proxy.DialTimeout,
		"proxy.response_header_timeout": c.Proxy.ResponseHeaderTimeout,
		"proxy.idle_conn_timeout":       c.Proxy.IdleConnTimeout,
		"wake.warm_ttl":                 c.Wake.WarmTTL,
		"wake.ready_timeout":            c.Wake.ReadyTimeout,
		"wake.wake_timeout":             c.Wake.WakeTimeout,
		"wake.retry_after":              c.Wake.RetryAfter,
		"wake.failure_backoff":          c.Wake.FailureBackoff,
		"wake.probe.attempt_timeout":    c.Wake.Probe.AttemptTimeout,
		"wake.probe.settle":             c.Wake.Probe.Settle,
		"wake.probe.min_pause":          c.Wake.Probe.MinPause,
		"wake.probe.max_pause":          c.Wake.Probe.MaxPause,
		"exec.stop_grace":               c.Exec.StopGrace,
		"exec.restart_window":           c.Exec.RestartWindow,
	}
	keys := make([]string, 0, len(positive))
	for k := range positive {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if positive[k] < 0 {
			bad(k, "must not be negative, got %s", positive[k])
		}
	}
	if *c.Wake.Hold < 0 {
		bad("wake.hold", "must not be negative")
	}
	if *c.Wake.Probe.PortWatch < 0 {
		bad("wake.probe.port_watch", "must not be negative")
	}
	if *c.Wake.IdleTimeout < 0 {
		bad("wake.idle_timeout", "must not be negative")
	}
	if c.Server.MaxHeaderBytes < 1024 {
		bad("server.max_header_bytes", "must be at least 1KiB, got %d", c.Server.MaxHeaderBytes)
	}
	if c.Server.MaxBodyBytes < 0 {
		bad("server.max_body_bytes", "must not be negative")
	}
	if c.Proxy.MaxIdleConnsPerHost < 0 {
		bad("proxy.max_idle_conns_per_host", "must not be negative")
	}
	if c.Wake.MaxConcurrent < 1 {
		bad("wake.max_concurrent", "must be at least 1")
	}
	if c.Exec.RestartBudget < 0 {
		bad("exec.restart_budget", "must not be negative")
	}
	c.Server.trusted = nil
	for i, cidr := range c.Server.TrustedProxies {
		_, n, err := net.ParseCIDR(cidr)
		if err != nil {
			if ip := net.ParseIP(cidr); ip != nil {
				bits := 128
				if ip.To4() != nil {
					ip, bits = ip.To4(), 32
				}
				n = &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)}
			} else {
				bad(fmt.Sprintf("server.trusted_proxies[%d]", i), "want a CIDR such as 10.0.0.0/8, got %q", cidr)
				continue
			}
		}
		c.Server.trusted = append(c.Server.trusted, n)
	}
	for i, o := range c.Server.WebSocketOrigins {
		if o == "*" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || u.Scheme == "" || u.Host == "" || (u.Path != "" && u.Path != "/") {
			bad(fmt.Sprintf("server.websocket_origins[%d]", i), "want scheme://host[:port] or *, got %q", o)
		}
	}
	c.Wake.noWakeUA = nil
	for i, p := range c.Wake.NoWakeUserAgents {
		re, err := regexp.Compile(p)
		if err != nil {
			bad(fmt.Sprintf("wake.no_wake_user_agents[%d]", i), "invalid regular expression: %v", err)
			continue
		}
		c.Wake.noWakeUA = append(c.Wake.noWakeUA, re)
	}
	for i, p := range c.Wake.NoWakePaths {
		if !strings.HasPrefix(p, "/") {
			bad(fmt.Sprintf("wake.no_wake_paths[%d]", i), "must start with /, got %q", p)
		}
	}
	switch c.Roll.Mode {
	case "lazy", "eager", "off":
	default:
		bad("roll.mode", "want lazy, eager or off, got %q", c.Roll.Mode)
	}
	if c.Roll.IdleAfter < 0 {
		bad("roll.idle_after", "must not be negative, got %s", c.Roll.IdleAfter)
	}
	if rt := c.Roll.Target; rt.Version == "" && (len(rt.Command) > 0 || rt.Image != "") {
		bad("roll.target.version", "required when roll.target.command or roll.target.image is set")
	}
	if rt := c.Roll.Target; len(rt.Command) > 0 && rt.Command[0] == "" {
		bad("roll.target.command", "must name a program")
	}
	c.Admin.tokens = nil
	if l := *c.Admin.Listen; l != "" {
		if _, _, err := net.SplitHostPort(l); err != nil {
			bad("admin.listen", "want host:port or an empty string (off), got %q", l)
		}
	}
	for i, ref := range c.Admin.Tokens {
		tok, err := resolveAdminToken(ref)
		switch {
		case err != nil:
			bad(fmt.Sprintf("admin.tokens[%d]", i), "%v", err)
		case tok != "" && len(tok) < 16:
			bad(fmt.Sprintf("admin.tokens[%d]", i), "a token must be at least 16 characters")
		case tok != "":
			c.Admin.tokens = append(c.Admin.tokens, tok)
		}
	}
	if c.Admin.AuthFailures < 1 {
		bad("admin.auth_failures_per_minute", "must be at least 1")
	}
	switch c.Wake.Probe.Kind {
	case "ws", "http", "tcp":
	default:
		bad("wake.probe.kind", "want ws, http or tcp, got %q", c.Wake.Probe.Kind)
	}
	if len(c.Exec.Command) == 0 || c.Exec.Command[0] == "" {
		bad("exec.command", "must name a program")
	}
	homes := map[string]bool{}
	targets := map[string]bool{}
	for i, h := range c.Homes {
		f := fmt.Sprintf("homes[%d]", i)
		if !idRE.MatchString(h.ID) {
			bad(f+".id", "want 1-63 of [a-z0-9._-] starting with a letter or digit, got %q", h.ID)
		} else if homes[h.ID] {
			bad(f+".id", "duplicate home id %q", h.ID)
		}
		homes[h.ID] = true
		if !registry.ValidSlug(h.Target) {
			bad(f+".target", "want 1-63 of [a-z0-9-] starting with a letter or digit, got %q", h.Target)
		} else if targets[h.Target] {
			bad(f+".target", "duplicate target %q", h.Target)
		}
		targets[h.Target] = true
		switch h.Provider {
		case "exec":
			if h.Endpoint != "" {
				bad(f+".endpoint", "only static homes have a fixed endpoint")
			}
		case "static":
			u, err := url.Parse(h.Endpoint)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad(f+".endpoint", "a static home needs an http or https URL, got %q", h.Endpoint)
			}
		default:
			bad(f+".provider", "unknown provider %q (built in: exec, static)", h.Provider)
		}
		switch h.Probe {
		case "ws", "http", "tcp":
		default:
			if h.Probe != c.Wake.Probe.Kind { // else reported once, at wake.probe.kind
				bad(f+".probe", "want ws, http or tcp, got %q", h.Probe)
			}
		}
		if h.RelayToken != "" {
			if _, err := ResolveSecret(h.RelayToken); err != nil {
				bad(f+".relay_token", "%v", err)
			}
		}
		if *h.IdleTimeout < 0 {
			bad(f+".idle_timeout", "must not be negative")
		}
	}
	slugs := map[string]bool{}
	for i, a := range c.Apps {
		f := fmt.Sprintf("apps[%d]", i)
		if registry.ValidSlug(a.Slug) && slugs[a.Slug] {
			bad(f+".slug", "duplicate slug %q", a.Slug)
		}
		slugs[a.Slug] = true
		// The per-app rules are the admin API's too.
		a.Check(func(id string) bool { return homes[id] }, func(field, format string, args ...any) {
			bad(f+"."+field, format, args...)
		})
	}
	return errs
}

// resolveAdminToken resolves one admin.tokens entry: a secret reference
// or the token itself; "" for an empty entry.
func resolveAdminToken(ref string) (string, error) {
	ref = strings.TrimSpace(ref)
	if strings.HasPrefix(ref, "env:") || strings.HasPrefix(ref, "file:") {
		return ResolveSecret(ref)
	}
	return ref, nil
}

// ResolveSecret reads a secret reference: "env:NAME" or "file:PATH".
func ResolveSecret(ref string) (string, error) {
	kind, arg, ok := strings.Cut(ref, ":")
	if !ok || arg == "" {
		return "", fmt.Errorf("want env:NAME or file:PATH, got %q", ref)
	}
	switch kind {
	case "env":
		v, ok := os.LookupEnv(arg)
		if !ok || v == "" {
			return "", fmt.Errorf("environment variable %s is not set or empty", arg)
		}
		return v, nil
	case "file":
		b, err := os.ReadFile(arg)
		if err != nil {
			return "", fmt.Errorf("read secret file: %w", err)
		}
		v := strings.TrimSpace(string(b))
		if v == "" {
			return "", fmt.Errorf("secret file %s is empty", arg)
		}
		return v, nil
	}
	return "", fmt.Errorf("want env:NAME or file:PATH, got %q", ref)
}
