package config

import (
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wakegate/wakegate/internal/provconf"
	"github.com/wakegate/wakegate/registry"
)

// The checks of the config, one method per section, run by Load after
// defaults: every field they read is filled. Each problem is reported with
// the file, the line and the dotted field name (e.g. "wake.probe.kind",
// "homes[2].id"); a field the file does not set is located at its nearest
// parent that it does set.

// checker collects the problems of one section of a config; field names
// given to it are relative to the section.
type checker struct {
	file   string
	lines  map[string]int // by dotted field path, from the YAML tree
	prefix string         // the section's path, e.g. "wake.probe"
	errs   *ConfigErrors
}

// in returns a checker for sub, a part of k's section ("probe", "homes[2]").
func (k checker) in(sub string) checker {
	k.prefix = k.path(sub)
	return k
}

// path is field's full dotted path.
func (k checker) path(field string) string {
	switch {
	case k.prefix == "":
		return field
	case field == "":
		return k.prefix
	case strings.HasPrefix(field, "["):
		return k.prefix + field
	}
	return k.prefix + "." + field
}

// bad reports a problem with field.
func (k checker) bad(field, format string, args ...any) {
	full := k.path(field)
	line := k.lines[full]
	// A defaulted field has no line of its own: point at its parent.
	for p := full; line == 0 && p != ""; {
		if i := strings.LastIndexAny(p, ".["); i > 0 {
			p = p[:i]
		} else {
			p = ""
		}
		line = k.lines[p]
	}
	*k.errs = append(*k.errs, &FieldError{File: k.file, Line: line, Field: full, Msg: fmt.Sprintf(format, args...)})
}

// nonNegative reports each negative duration of ds, by field.
func (k checker) nonNegative(ds ...namedDuration) {
	for _, d := range ds {
		if d.v < 0 {
			k.bad(d.field, "must not be negative, got %s", d.v)
		}
	}
}

// namedDuration is a duration field and its value.
type namedDuration struct {
	field string
	v     time.Duration
}

// oneOf reports field unless v is one of allowed.
func (k checker) oneOf(field, v string, allowed ...string) {
	for _, a := range allowed {
		if v == a {
			return
		}
	}
	want := strings.Join(allowed[:len(allowed)-1], ", ") + " or " + allowed[len(allowed)-1]
	k.bad(field, "want %s, got %q", want, v)
}

// hostPort reports field unless v is host:port.
func (k checker) hostPort(field, v, want string) {
	if _, _, err := net.SplitHostPort(v); err != nil {
		k.bad(field, "want %s, got %q", want, v)
	}
}

var idRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// validate checks every section of c, whose defaults are filled, and
// resolves what the running gateway reads resolved (trusted proxy
// networks, no-wake patterns, admin tokens).
func (c *Config) validate(lines map[string]int) ConfigErrors {
	var errs ConfigErrors
	k := checker{file: c.file, lines: lines, errs: &errs}
	k.hostPort("listen", c.Listen, "host:port")
	k.publicURL("public_url", c.PublicURL)
	c.Log.validate(k.in("log"))
	c.Server.validate(k.in("server"))
	c.Proxy.validate(k.in("proxy"))
	c.Wake.validate(k.in("wake"))
	c.Exec.validate(k.in("exec"), c.providers.Exec)
	c.Admin.validate(k.in("admin"))
	c.Roll.validate(k.in("roll"))
	c.TLS.validate(k.in("tls"), c.Hosts)
	c.Hosts.validate(k.in("hosts"))
	c.Redis.validate(k.in("redis"))
	c.validateAccess(k)
	c.table = c.providers.Table(c)
	c.checkProviderSections(k)
	homes := validateHomes(k, c.Homes, c.Wake.Probe.Kind, c.table, c.AvailableProviders())
	validateApps(k, c.Apps, homes)
	c.checkHomeSockets(k)
	c.checkSchedules(k) // schedule.go
	c.validatePages(k)  // waiting.go
	validateWebhooks(k, c.Webhooks)
	return errs
}

func (l *LogConfig) validate(k checker) {
	k.oneOf("format", l.Format, "text", "json")
	if _, err := ParseLevel(l.Level); err != nil {
		k.bad("level", "%v", err)
	}
}

func (s *ServerConfig) validate(k checker) {
	k.nonNegative(namedDuration{"drain_delay", s.DrainDelay}, namedDuration{"drain_grace", s.DrainGrace},
		namedDuration{"idle_timeout", s.IdleTimeout}, namedDuration{"read_header_timeout", s.ReadHeaderTimeout},
		namedDuration{"min_rate_grace", s.MinRateGrace}, namedDuration{"min_rate_window", s.MinRateWindow})
	k.oneOf("drain_websockets", s.DrainWebSockets, "start", "end")
	k.oneOf("http1_server", s.HTTP1Server, "wakegate", "net/http")
	if msg := checkRootRedirect(s.RootRedirect); msg != "" {
		k.bad("root_redirect", "%s", msg)
	}
	if s.MinBodyRate < 0 {
		k.bad("min_body_rate", "must not be negative")
	}
	if s.MinResponseRate < 0 {
		k.bad("min_response_rate", "must not be negative")
	}
	if s.GCHeadroom < 0 {
		k.bad("gc_headroom", "must not be negative")
	}
	if s.MaxConnsPerClient < 1 {
		k.bad("max_conns_per_client", "must be at least 1")
	}
	if s.MaxHeaderBytes < 1024 {
		k.bad("max_header_bytes", "must be at least 1KiB, got %d", s.MaxHeaderBytes)
	}
	if s.MaxBodyBytes < 0 {
		k.bad("max_body_bytes", "must not be negative")
	}
	s.trusted = nil
	for i, cidr := range s.TrustedProxies {
		n, err := parseTrusted(cidr)
		if err != nil {
			k.bad(fmt.Sprintf("trusted_proxies[%d]", i), "want a CIDR such as 10.0.0.0/8, got %q", cidr)
			continue
		}
		s.trusted = append(s.trusted, n)
	}
	for i, o := range s.WebSocketOrigins {
		if o == "*" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || u.Scheme == "" || u.Host == "" || (u.Path != "" && u.Path != "/") {
			k.bad(fmt.Sprintf("websocket_origins[%d]", i), "want scheme://host[:port] or *, got %q", o)
		}
	}
}

// parseTrusted parses a CIDR, or a single address as a network of one.
func parseTrusted(cidr string) (*net.IPNet, error) {
	_, n, err := net.ParseCIDR(cidr)
	if err == nil {
		return n, nil
	}
	ip := net.ParseIP(cidr)
	if ip == nil {
		return nil, fmt.Errorf("trusted proxy %q: %w", cidr, err)
	}
	bits := 128
	if ip.To4() != nil {
		ip, bits = ip.To4(), 32
	}
	return &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)}, nil
}

func (p *ProxyConfig) validate(k checker) {
	k.nonNegative(namedDuration{"dial_timeout", p.DialTimeout}, namedDuration{"idle_conn_timeout", p.IdleConnTimeout},
		namedDuration{"response_header_timeout", p.ResponseHeaderTimeout},
		namedDuration{"home_response_header_timeout", p.HomeResponseHeaderTimeout})
	if p.MaxIdleConnsPerHost < 0 {
		k.bad("max_idle_conns_per_host", "must not be negative")
	}
	if p.MaxConnsPerHome < 0 {
		k.bad("max_conns_per_home", "must not be negative (0 is no cap)")
	}
	if p.BodyBuffer < 0 {
		k.bad("body_buffer", "must not be negative (0 turns request buffering off)")
	}
	if p.BodySpool < 0 {
		k.bad("body_spool", "must not be negative (0 keeps request bodies off the disk)")
	}
	if msg := checkHostRule(p.HostHeader); msg != "" {
		k.bad("host_header", "%s", msg)
	}
	for _, rules := range []struct {
		field string
		m     map[string]string
	}{{"host_headers.homes", p.HostHeaders.Homes}, {"host_headers.apps", p.HostHeaders.Apps}} {
		for _, name := range slices.Sorted(maps.Keys(rules.m)) {
			if msg := checkHostRule(rules.m[name]); msg != "" {
				k.bad(rules.field+"."+name, "%s", msg)
			}
		}
	}
	for _, b := range []struct {
		name string
		v    ByteSize
	}{{"body_budget_client", p.BodyBudgetClient}, {"body_budget_total", p.BodyBudgetTotal}} {
		switch {
		case b.v < 0:
			k.bad(b.name, "must not be negative (0 turns the budget off)")
		case b.v > 0 && b.v < p.BodyBuffer:
			k.bad(b.name, "must be at least body_buffer (%d), or no body could be read ahead", int64(p.BodyBuffer))
		}
	}
}

func (w *WakeConfig) validate(k checker) {
	k.nonNegative(namedDuration{"failure_backoff", w.FailureBackoff},
		namedDuration{"failure_backoff_max", w.FailureBackoffMax}, namedDuration{"hold", w.Hold},
		namedDuration{"idle_timeout", w.IdleTimeout}, namedDuration{"ready_timeout", w.ReadyTimeout},
		namedDuration{"retry_after", w.RetryAfter}, namedDuration{"wake_timeout", w.WakeTimeout},
		namedDuration{"warm_ttl", w.WarmTTL})
	if w.MaxConcurrent < 1 {
		k.bad("max_concurrent", "must be at least 1")
	}
	if w.FailureBackoffMax > 0 && w.FailureBackoffMax < w.FailureBackoff {
		k.bad("failure_backoff_max", "must be at least failure_backoff (%s)", w.FailureBackoff)
	}
	w.noWakeUA = nil
	for i, p := range w.NoWakeUserAgents {
		re, err := regexp.Compile(p)
		if err != nil {
			k.bad(fmt.Sprintf("no_wake_user_agents[%d]", i), "invalid regular expression: %v", err)
			continue
		}
		w.noWakeUA = append(w.noWakeUA, re)
	}
	for i, p := range w.NoWakePaths {
		if !strings.HasPrefix(p, "/") {
			k.bad(fmt.Sprintf("no_wake_paths[%d]", i), "must start with /, got %q", p)
		}
	}
	w.Probe.validate(k.in("probe"))
}

func (p *ProbeConfig) validate(k checker) {
	k.oneOf("kind", p.Kind, "auto", "ws", "http", "tcp")
	k.nonNegative(namedDuration{"attempt_timeout", p.AttemptTimeout}, namedDuration{"ws_timeout", p.WSTimeout},
		namedDuration{"max_pause", p.MaxPause},
		namedDuration{"min_pause", p.MinPause}, namedDuration{"port_watch", p.PortWatch},
		namedDuration{"settle", p.Settle})
}

func (e *ExecConfig) validate(k checker, rules ExecRules) {
	if len(e.Command) == 0 || e.Command[0] == "" {
		k.bad("command", "must name a program")
	}
	k.nonNegative(namedDuration{"restart_window", e.RestartWindow}, namedDuration{"stop_grace", e.StopGrace},
		namedDuration{"restart_pause", e.RestartPause})
	if e.RestartBudget < 0 {
		k.bad("restart_budget", "must not be negative")
	}
	for i, n := range e.InheritEnv {
		if !envNameRE.MatchString(n) {
			k.bad(fmt.Sprintf("inherit_env[%d]", i), "want a variable name, got %q", n)
		}
	}
	k.oneOf("containment", e.Containment, rules.Containments...)
	uk := k.in("users")
	uk.oneOf("mode", e.Users.Mode, rules.UserModes...)
	first, last, ok := parseUIDRange(e.Users.Range)
	if !ok {
		uk.bad("range", "want FIRST-LAST, uids with 0 < FIRST <= LAST < 2147483648, got %q", e.Users.Range)
	}
	e.Users.first, e.Users.last = first, last
	if !filepath.IsAbs(e.Users.MachineDir) {
		uk.bad("machine_dir", "want an absolute path, got %q", e.Users.MachineDir)
	}
}

// envNameRE is a portable environment variable name.
var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// parseUIDRange parses "FIRST-LAST".
func parseUIDRange(s string) (first, last uint32, ok bool) {
	a, b, found := strings.Cut(strings.TrimSpace(s), "-")
	if !found {
		return 0, 0, false
	}
	f, err1 := strconv.ParseUint(strings.TrimSpace(a), 10, 31)
	l, err2 := strconv.ParseUint(strings.TrimSpace(b), 10, 31)
	if err1 != nil || err2 != nil || f == 0 || f > l {
		return 0, 0, false
	}
	return uint32(f), uint32(l), true
}

// shortTokenMessage says that the admin token of reference ref, n
// characters long, is too short, naming where it came from (never the
// token) when it came from the environment or a file.
func shortTokenMessage(ref string, n int) string {
	const fix = "a token must be at least 16 characters; make one with `openssl rand -hex 16`"
	if r := strings.TrimSpace(ref); strings.HasPrefix(r, "env:") || strings.HasPrefix(r, "file:") {
		return fmt.Sprintf("the token from %s has %d characters: %s", r, n, fix)
	}
	return fix
}

func (a *AdminConfig) validate(k checker) {
	if a.Listen != "" {
		k.hostPort("listen", a.Listen, "host:port or an empty string (off)")
	}
	a.tokens = nil
	for i, ref := range a.Tokens {
		tok, err := resolveAdminToken(ref)
		switch {
		case err != nil:
			k.bad(fmt.Sprintf("tokens[%d]", i), "%v", err)
		case tok != "" && len(tok) < 16:
			k.bad(fmt.Sprintf("tokens[%d]", i), "%s", shortTokenMessage(ref, len(tok)))
		case tok != "":
			a.tokens = append(a.tokens, tok)
		}
	}
	if a.AuthFailures < 1 {
		k.bad("auth_failures_per_minute", "must be at least 1")
	}
	a.socketGID = -1
	if a.SocketGroup != "" {
		gid, err := lookupGroup(a.SocketGroup)
		if err != nil {
			k.bad("socket_group", "want a group name or gid of this machine: %v", err)
		}
		a.socketGID = gid
	}
	if a.SocketGroup != "" && a.Socket == "" {
		k.bad("socket_group", "set with the admin socket off (admin.socket is empty)")
	}
}

func (r *RollConfig) validate(k checker) {
	k.oneOf("mode", r.Mode, "lazy", "eager", "off")
	k.nonNegative(namedDuration{"idle_after", r.IdleAfter})
	if t := r.Target; t.Version == "" && (len(t.Command) > 0 || t.Image != "") {
		k.bad("target.version", "required when roll.target.command or roll.target.image is set")
	}
	if t := r.Target; len(t.Command) > 0 && t.Command[0] == "" {
		k.bad("target.command", "must name a program")
	}
}

// validateHomes checks every home and that ids and targets are unique; it
// returns the set of home ids. probeKind is wake.probe.kind, whose own
// problem is reported there, not again at every home that inherits it.
func validateHomes(k checker, homes []HomeConfig, probeKind string, table ProviderTable, avail []string) map[string]bool {
	ids, targets := map[string]bool{}, map[string]bool{}
	for i := range homes {
		h := &homes[i]
		hk := k.in(fmt.Sprintf("homes[%d]", i))
		h.validate(hk, probeKind, table, avail)
		if idRE.MatchString(h.ID) && ids[h.ID] {
			hk.bad("id", "duplicate home id %q", h.ID)
		}
		if registry.ValidSlug(h.Target) && targets[h.Target] {
			hk.bad("target", "duplicate target %q", h.Target)
		}
		ids[h.ID], targets[h.Target] = true, true
	}
	return ids
}

// TargetFromID is a target made from id by the target's rule: lower case,
// every other character a dash.
func TargetFromID(id string) string {
	b := []byte(strings.ToLower(id))
	for i, c := range b {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			b[i] = '-'
		}
	}
	return string(b)
}

func (h *HomeConfig) validate(k checker, probeKind string, table ProviderTable, avail []string) {
	if !idRE.MatchString(h.ID) {
		k.bad("id", "want 1-63 of [a-z0-9._-] starting with a letter or digit, got %q", h.ID)
	}
	_, targetWritten := k.lines[k.path("target")]
	switch {
	case registry.ValidSlug(h.Target):
	case !targetWritten && idRE.MatchString(h.ID):
		// The target was not written: it is the id, whose rule allows
		// more than a target's. Name the field the user wrote.
		k.bad("id", "%q is also the home's target (/node/%s) since no target is set, and a target is 1-63 of "+
			"[a-z0-9-] starting with a letter or digit: set target (for example target: %s) or change the id",
			h.ID, h.ID, TargetFromID(h.ID))
	case targetWritten:
		k.bad("target", "want 1-63 of [a-z0-9-] starting with a letter or digit, got %q", h.Target)
	}
	if h.Endpoint != "" && h.Provider != "static" {
		k.bad("endpoint", "only static homes have a fixed endpoint")
	}
	if h.socketActivationSet && h.Provider != "exec" {
		k.bad("socket_activation", "only exec homes are started by the gateway with a socket")
	}
	d, err := h.Decl()
	if err != nil {
		k.bad("options", "%v", err)
	}
	_, endpointOpt := h.Options["endpoint"]
	for _, p := range d.Check(table, avail) {
		switch {
		case p.Field == "id" || p.Field == "target" || p.Field == "idle_timeout":
			continue // above
		case (p.Field == "probe" || p.Field == "probe.kind") && h.Probe.Kind == probeKind:
			continue // wake.probe.kind's own problem, reported there
		case p.Field == "options.endpoint" && !endpointOpt:
			p.Field = "endpoint" // the shorthand the file used
		}
		k.bad(p.Field, "%s", p.Msg)
	}
	if h.RelayToken != "" {
		if _, err := provconf.ResolveSecret(h.RelayToken); err != nil {
			k.bad("relay_token", "%v", err)
		}
	}
	k.nonNegative(namedDuration{"idle_timeout", h.IdleTimeout})
}

// checkHomeSockets reports the exec homes listening on {socket} whose
// socket path would be too long for a Unix socket.
func (c *Config) checkHomeSockets(k checker) {
	dataDir, err := filepath.Abs(c.DataDir)
	if err != nil {
		return
	}
	for i := range c.Homes {
		h := &c.Homes[i]
		if h.Provider != "exec" || !idRE.MatchString(h.ID) {
			continue
		}
		field, cmd := "command", h.Command
		if len(cmd) == 0 {
			cmd = c.Exec.Command
			field = "id" // the home inherits exec.command; its id makes the path
		}
		if !c.providers.Exec.UsesSocket(cmd) {
			continue
		}
		if c.socketActivated(h) {
			k.in(fmt.Sprintf("homes[%d]", i)).bad("socket_activation", "a home on {socket} listens on a Unix socket of its own: "+
				"turn socket activation off for it, or use {port}")
			continue
		}
		if _, err := c.providers.Exec.SocketPath(dataDir, h.ID); err != nil {
			k.in(fmt.Sprintf("homes[%d]", i)).bad(field, "%v", err)
		}
	}
}

// validateApps checks every app with the rules of registry.App (the admin
// API's too) and that slugs are unique; homes is the set of home ids.
func validateApps(k checker, apps []registry.App, homes map[string]bool) {
	slugs := map[string]bool{}
	for i, a := range apps {
		ak := k.in(fmt.Sprintf("apps[%d]", i))
		if registry.ValidSlug(a.Slug) && slugs[a.Slug] {
			ak.bad("slug", "duplicate slug %q", a.Slug)
		}
		slugs[a.Slug] = true
		a.Check(func(id string) bool { return homes[id] }, ak.bad)
	}
}

// publicURL checks public_url: empty, or an absolute http(s) URL with a
// host and no path, query or fragment.
func (k checker) publicURL(field, v string) {
	if v == "" {
		return
	}
	u, err := url.Parse(v)
	switch {
	case err != nil:
		k.bad(field, "invalid URL %q: %v", v, err)
	case u.Scheme != "http" && u.Scheme != "https":
		k.bad(field, "%q: want an http:// or https:// URL", v)
	case u.Host == "" || u.User != nil:
		k.bad(field, "%q: want scheme://host[:port], with a host and no user", v)
	case strings.TrimSuffix(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "":
		k.bad(field, "%q: want the base URL only, without a path, query or fragment", v)
	}
}

// checkRootRedirect says what is wrong with a server.root_redirect value,
// or "" when it is usable.
func checkRootRedirect(v string) string {
	if v == "" || (strings.HasPrefix(v, "/") && !strings.HasPrefix(v, "//")) {
		return ""
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Sprintf("want an http(s) URL or a path starting with /, got %q", v)
	}
	return ""
}

// lookupGroup resolves admin.socket_group, a group name or a numeric gid.
func lookupGroup(name string) (int, error) {
	if n, err := strconv.Atoi(name); err == nil && n >= 0 {
		return n, nil
	}
	g, err := user.LookupGroup(name)
	if err != nil {
		return -1, fmt.Errorf("group %q: %w", name, err)
	}
	n, err := strconv.Atoi(g.Gid)
	if err != nil {
		return -1, fmt.Errorf("group %q: gid %q: %w", name, g.Gid, err)
	}
	return n, nil
}

// ParseLevel parses a log level name.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("want debug, info, warn or error, got %q", s)
}
