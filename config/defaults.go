package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"time"

	"github.com/wakegate/wakegate/internal/homesdir"
	"github.com/wakegate/wakegate/internal/provconf"
	"github.com/wakegate/wakegate/tlsfront"
)

// Every default of the config is written here, and only here: defaults runs
// once, in Load, before validate, and the rest of the code reads the
// filled fields and never tests for zero again. Two sections' defaults are
// methods of their own packages, shared with another input: an app's are
// registry.App.Default (the admin API's apps too), and the access and
// limits sections' are access.Config.Defaults and LimitsConfig.Defaults.
// The section exec takes the exec provider's values where they are its
// own (containment, users.mode, users.range, pids_max), handed to Load in
// Providers.Exec.
//
// A field whose zero means something other than "the default" (wake.hold,
// wake.idle_timeout, wake.probe.port_watch, admin.listen, log.access and
// the like) is told unset by the file's unset part (unset.go), decoded
// beside the config; the config itself holds plain values.

// DefaultNoWakeUserAgents match uptime monitors, link previewers and crawlers.
var DefaultNoWakeUserAgents = []string{
	`(?i)bot\b`, `(?i)crawler`, `(?i)spider`, `(?i)uptime`, `(?i)pingdom`,
	`(?i)statuscake`, `(?i)healthcheck`, `(?i)monitor`, `(?i)slurp`, `(?i)facebookexternalhit`,
}

// defaultExecCommand runs the built-in demo home.
var defaultExecCommand = []string{"{self}", "demo-home", "--addr", "127.0.0.1:{port}", "--target", "{target}", "--version", "{version}"}

// defaults fills every unset field of c; u says which of the fields whose
// zero is a setting the file left out.
func (c *Config) defaults(u *unset) {
	c.TLS.defaults(u)
	if c.TLS.On() {
		def(&c.Listen, ":443")
	}
	def(&c.Listen, "127.0.0.1:8080") // this machine only, until the operator says otherwise
	def(&c.DataDir, "./data")
	if c.Instance == "" {
		host, _ := os.Hostname()
		c.Instance = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	c.Log.defaults(u)
	c.Server.defaults(u)
	c.Proxy.defaults(u)
	c.Wake.defaults(u)
	c.Exec.defaults(c.providers.Exec)
	c.Admin.defaults(u)
	if u.Admin.Socket == nil {
		c.Admin.socketDefault = true
		c.Admin.Socket = filepath.Join(c.DataDir, "admin.sock")
	}
	c.Roll.defaults()
	c.Redis.defaults()
	c.accessDefaults()
	for i := range c.Homes {
		c.Homes[i].defaults(&c.Wake, &c.Exec, u.home(i))
	}
	for i := range c.Apps {
		c.Apps[i].Default()
	}
	for i := range c.Webhooks {
		c.Webhooks[i].defaults()
	}
}

func (l *LogConfig) defaults(u *unset) {
	def(&l.Format, "text")
	def(&l.Level, "info")
	defUnset(&l.Access, u.Log.Access, true)
}

func (s *ServerConfig) defaults(u *unset) {
	def(&s.ReadHeaderTimeout, 10*time.Second)
	def(&s.IdleTimeout, 120*time.Second)
	def(&s.MaxHeaderBytes, 64<<10)
	def(&s.MaxBodyBytes, 32<<20)
	def(&s.DrainGrace, 20*time.Second)
	def(&s.DrainWebSockets, "start")
	def(&s.HTTP1Server, "wakegate")
	defUnset(&s.MinBodyRate, u.Server.MinBodyRate, 240)
	defUnset(&s.MinResponseRate, u.Server.MinResponseRate, 240)
	s.gcHeadroomDefault = u.Server.GCHeadroom == nil
	def(&s.MinRateGrace, 5*time.Second)
	def(&s.MinRateWindow, 5*time.Second)
	def(&s.MaxConnsPerClient, 1024)
}

func (p *ProxyConfig) defaults(u *unset) {
	def(&p.DialTimeout, 5*time.Second)
	def(&p.ResponseHeaderTimeout, 60*time.Second)
	def(&p.HomeResponseHeaderTimeout, 30*time.Second)
	def(&p.MaxIdleConnsPerHost, 256)
	defUnset(&p.MaxConnsPerHome, u.Proxy.MaxConnsPerHome, 256)
	defUnset(&p.BodyBuffer, u.Proxy.BodyBuffer, 64<<10)
	defUnset(&p.BodySpool, u.Proxy.BodySpool, 32<<20)
	defUnset(&p.BodyBudgetClient, u.Proxy.BodyBudgetClient, 128<<20)
	defUnset(&p.BodyBudgetTotal, u.Proxy.BodyBudgetTotal, 1<<30)
	def(&p.IdleConnTimeout, 90*time.Second)
	def(&p.RelayHeader, "X-Wakegate-Relay")
	def(&p.HostHeader, HostAuto)
}

func (w *WakeConfig) defaults(u *unset) {
	def(&w.WarmTTL, 10*time.Second)
	def(&w.ReadyTimeout, 30*time.Second)
	def(&w.WakeTimeout, 60*time.Second)
	defUnset(&w.Hold, u.Wake.Hold, time.Second)
	defUnset(&w.IdleTimeout, u.Wake.IdleTimeout, 5*time.Minute)
	def(&w.MaxConcurrent, 16)
	def(&w.RetryAfter, 5*time.Second)
	def(&w.FailureBackoff, 2*time.Second)
	def(&w.FailureBackoffMax, max(5*time.Minute, w.FailureBackoff))
	if w.NoWakeUserAgents == nil {
		w.NoWakeUserAgents = DefaultNoWakeUserAgents
	}
	if w.NoWakePaths == nil {
		w.NoWakePaths = []string{"/favicon.ico", "/robots.txt"}
	}
	w.Probe.defaults(u)
}

func (p *ProbeConfig) defaults(u *unset) {
	def(&p.Kind, "auto")
	def(&p.Path, "/node/{target}/")
	def(&p.AttemptTimeout, 2*time.Second)
	def(&p.WSTimeout, time.Second)
	def(&p.Settle, 300*time.Millisecond)
	def(&p.MinPause, 2*time.Millisecond)
	def(&p.MaxPause, 100*time.Millisecond)
	defUnset(&p.PortWatch, u.Wake.Probe.PortWatch, 2*time.Millisecond)
}

func (e *ExecConfig) defaults(rules ExecRules) {
	if len(e.Command) == 0 {
		e.Command = defaultExecCommand
	}
	def(&e.StopGrace, 5*time.Second)
	def(&e.LogMaxBytes, 1<<20)
	def(&e.RestartBudget, 3)
	def(&e.RestartWindow, 60*time.Second)
	def(&e.RestartPause, 100*time.Millisecond)
	def(&e.Users.Mode, rules.UserModes[0])
	def(&e.Containment, rules.Containments[0])
	def(&e.Users.Range, rules.UserRange)
	def(&e.Users.MachineDir, homesdir.DefaultMachineDir)
	def(&e.PidsMax, rules.PidsMax)
}

func (a *AdminConfig) defaults(u *unset) {
	defUnset(&a.Listen, u.Admin.Listen, "127.0.0.1:8081")
	if a.Tokens == nil && os.Getenv(TokenEnv) != "" {
		// A config without tokens takes the one the CLI reads, so a file
		// written from scratch turns the admin listener on the same way
		// the embedded default does.
		a.Tokens = []string{"env:" + TokenEnv}
	}
	def(&a.AuthFailures, 10)
}

func (r *RollConfig) defaults() {
	def(&r.Mode, "lazy")
	def(&r.IdleAfter, time.Minute)
}

func (t *TLSConfig) defaults(u *unset) {
	def(&t.Mode, string(tlsfront.Off))
	if t.On() {
		defUnset(&t.HTTPListen, u.TLS.HTTPListen, ":80")
	}
	if t.Mode == string(tlsfront.Internal) && len(t.Names) == 0 {
		t.Names = []string{"localhost"}
	}
	def(&t.CA, letsEncrypt)
	if t.Challenges == nil {
		t.Challenges = []string{"http-01", "tls-alpn-01"}
	}
	def(&t.HandshakeTimeout, 30*time.Second)
	def(&t.KeyExchange, "hybrid")
	def(&t.OnDemand.IssuePerMinute, 30)
	def(&t.OnDemand.CacheSize, 10000)
	def(&t.OnDemand.CacheTTL, time.Minute)
	def(&t.HTTP2.MaxConcurrentStreams, 250)
	def(&t.HTTP2.MaxResetsPerSecond, 100)
}

func (r *RedisConfig) defaults() {
	def(&r.Prefix, "wakegate")
	def(&r.DialTimeout, time.Second)
	def(&r.ReadTimeout, time.Second)
	def(&r.WriteTimeout, time.Second)
	def(&r.PoolTimeout, time.Second)
	def(&r.PoolSize, 32)
}

// accessDefaults fills the access and limits sections.
func (c *Config) accessDefaults() {
	c.Access.Defaults()
	c.Limits.Defaults()
}

// Decl is h in the shape the admin API's homes share (control/decl.go).
func (h *HomeConfig) Decl() (HomeDecl, error) {
	st, err := h.settings()
	// A bad schedule is reported by the config's check with its entry
	// (checkSchedules); a checked config has none.
	sch, _ := h.Schedule.compile()
	return HomeDecl{ID: h.ID, Target: h.Target, Provider: h.Provider, Version: h.Version, RelayToken: h.RelayToken,
		Probe: h.Probe, IdleTimeout: h.IdleTimeout, ReadyTimeout: h.ReadyTimeout, Settings: st, Schedule: sch}, err
}

// settings are h's provider settings; a static home's endpoint (the
// shorthand of options.endpoint) is among its options.
func (h *HomeConfig) settings() (provconf.Settings, error) {
	st := provconf.Settings{Command: h.Command, Env: h.Env, Dir: h.WorkingDir}
	opts := h.Options
	if h.socketActivationSet {
		opts = maps.Clone(opts)
		if opts == nil {
			opts = map[string]any{}
		}
		if _, ok := opts["socket_activation"]; !ok {
			opts["socket_activation"] = h.SocketActivation
		}
	}
	if h.Endpoint != "" && h.Provider == "static" {
		opts = maps.Clone(opts)
		if opts == nil {
			opts = map[string]any{}
		}
		if _, ok := opts["endpoint"]; !ok {
			opts["endpoint"] = h.Endpoint
		}
	}
	if len(opts) > 0 {
		b, err := json.Marshal(opts)
		if err != nil {
			return st, fmt.Errorf("want a mapping of settings: %w", err)
		}
		st.Options = b
	}
	return st, nil
}

// defaults fills h's unset fields (u says which the file left out); some
// default to w's and e's settings.
func (h *HomeConfig) defaults(w *WakeConfig, e *ExecConfig, u unsetHome) {
	def(&h.Target, h.ID)
	def(&h.Provider, "exec")
	def(&h.Version, "1")
	def(&h.Probe.Kind, w.Probe.Kind)
	defUnset(&h.IdleTimeout, u.IdleTimeout, w.IdleTimeout)
	if h.Schedule == nil {
		h.Schedule = w.Schedule
	}
	h.socketActivationSet = u.SocketActivation != nil
	if h.Provider == "exec" {
		defUnset(&h.SocketActivation, u.SocketActivation, e.SocketActivation)
	}
}

// def sets *p to v when *p is zero.
func def[T comparable](p *T, v T) {
	var zero T
	if *p == zero {
		*p = v
	}
}

// TokenEnv is the environment variable that holds an admin token for the
// gateway (when admin.tokens is unset) and for the CLI.
const TokenEnv = "WAKEGATE_TOKEN"
