package config

import (
	"fmt"
	"math"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/wakegate/wakegate/access"
	"github.com/wakegate/wakegate/internal/provconf"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/web"
)

// Config is the whole gateway configuration, as read from YAML. Every field
// documents its default, its unit and what zero means; defaults are filled
// once by Load, and the rest of the code never tests for zero again.
type Config struct {
	// Listen is the public listener's address, host:port. Default
	// "127.0.0.1:8080" (this machine only; ":8080" listens on every
	// interface), or ":443" with TLS on (tls.mode); empty means the
	// default.
	Listen string `yaml:"listen"`
	// PublicURL is the base URL people reach the public listener at,
	// scheme://host[:port] with no path, for the links to apps in the
	// dashboard and the admin API. Default (when empty): https://{the
	// first tls.names entry} with TLS on, else http://{listen}; a listen
	// address without a host leaves the host to the dashboard, which uses
	// the one it was opened at.
	PublicURL string `yaml:"public_url"`
	// DataDir holds state (the embedded store) and home data and logs.
	// Default "./data"; empty means the default. Relative paths are
	// relative to the working directory.
	DataDir string `yaml:"data_dir"`
	// Instance names this gateway in logs and shared state. Default (and
	// when empty): the host name and the process id. In a fleet each
	// gateway needs a name of its own: one refuses to start while another
	// live gateway reports under its name (docs/fleet.md).
	Instance string `yaml:"instance"`

	// Log, Server, Proxy, Wake, Exec, Admin and Roll are the sections;
	// each documents its own fields.
	Log    LogConfig    `yaml:"log"`
	Server ServerConfig `yaml:"server"`
	Proxy  ProxyConfig  `yaml:"proxy"`
	Wake   WakeConfig   `yaml:"wake"`
	Exec   ExecConfig   `yaml:"exec"`
	Admin  AdminConfig  `yaml:"admin"`
	Roll   RollConfig   `yaml:"roll"`
	// TLS is the TLS front door and Hosts host routing (tls.go).
	TLS   TLSConfig   `yaml:"tls"`
	Hosts HostsConfig `yaml:"hosts"`
	// Redis is the shared store of a fleet (redis.go); without it
	// the embedded store under data_dir serves this gateway alone.
	Redis RedisConfig `yaml:"redis"`
	// Access says who may reach each home and app, and Limits bounds
	// abuse (package access; access.go).
	Access access.Config       `yaml:"access"`
	Limits access.LimitsConfig `yaml:"limits"`

	// Providers holds the config section of each provider beyond exec
	// (section exec) and static (no section), by name: providers.NAME.
	// Each provider documents its own fields; a provider that needs a
	// section is available to homes only when it is configured. Default
	// none.
	Providers map[string]yaml.Node `yaml:"providers"`

	// Homes are the sleepable backends reached at /node/{target}/.
	// Default none.
	Homes []HomeConfig `yaml:"homes"`
	// Apps are the services reached at /apps/{slug}/ (registry.App
	// documents each field and its default). Default none.
	Apps []registry.App `yaml:"apps"`
	// Webhooks receive the lifecycle events (webhooks.go), each POSTed
	// as JSON to every webhook that lists its type. Restart-only.
	// Default none.
	Webhooks []WebhookConfig `yaml:"webhooks"`

	// ResetStore lets the gateway start with a new, empty store where the
	// store is missing or empty although data_dir holds home folders
	// (every stored home and the roll target are then forgotten). It is
	// not read from YAML: `wakegate serve --reset-store` sets it for one
	// start. Default false: such a start is refused.
	ResetStore bool `yaml:"-"`

	// file is the config's name for error messages.
	file string
	// empty: the file sets nothing (no text, only comments, or {}).
	empty bool
	// displayNames and homeThemes are the homes' display names and waiting
	// themes by id (route/waitpage.go).
	displayNames, homeThemes map[string]string
	// providers are what Load was handed; table is the table of this
	// config's providers (ProviderTable).
	providers Providers
	table     ProviderTable
}

// LogConfig configures logging.
type LogConfig struct {
	// Format is "text" or "json". Default "text"; empty means the default.
	Format string `yaml:"format"`
	// Level is "debug", "info", "warn" or "error". Default "info"; empty
	// means the default.
	Level string `yaml:"level"`
	// Access turns the per-request access log on. Default true (when
	// unset); false turns it off.
	Access bool `yaml:"access"`
}

// ServerConfig hardens the public listener.
type ServerConfig struct {
	// ReadHeaderTimeout bounds reading a request's headers. Default 10s;
	// zero means the default.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	// IdleTimeout closes keep-alive connections idle this long (on a
	// busy connection, up to an eighth of it and at most a second more).
	// Default 120s; zero means the default.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// MaxHeaderBytes caps the size of request headers (431 past it), in
	// bytes (units as ByteSize). Default 64KiB; zero means the default; at
	// least 1KiB.
	MaxHeaderBytes ByteSize `yaml:"max_header_bytes"`
	// MaxBodyBytes caps a request body (413 past it), in bytes (units as
	// ByteSize). Default 32MiB; zero means the default.
	MaxBodyBytes ByteSize `yaml:"max_body_bytes"`
	// DrainGrace is how long shutdown lets in-flight requests and open
	// WebSockets finish before closing them. Default 20s; zero means the
	// default.
	DrainGrace time.Duration `yaml:"drain_grace"`
	// DrainDelay is how long shutdown keeps serving, with /readyz answering
	// 503, before it stops accepting, so that a load balancer polling
	// /readyz moves traffic away first. Default 0s: zero stops accepting
	// at once.
	DrainDelay time.Duration `yaml:"drain_delay"`
	// DrainWebSockets is when shutdown sends every relayed WebSocket a
	// close frame (1001 going away) on both sides: "start" (default, and
	// when empty) when the drain grace begins, so that shutdown waits only
	// for the requests in flight; "end" when the grace is over, after
	// letting WebSockets run through it.
	DrainWebSockets string `yaml:"drain_websockets"`
	// HTTP1Server is what serves HTTP/1.1 requests on the public
	// listener, plain or over TLS: "wakegate" (default, and when empty),
	// the gateway's own HTTP/1.1 loop, which hands every connection it does
	// not take (upgrades, Expect, chunked or HTTP/1.0 requests, anything
	// unusual, and HTTP/2) to Go's server; "net/http", Go's server for
	// everything.
	HTTP1Server string `yaml:"http1_server"`
	// MinBodyRate is the least rate, in bytes per second (units as
	// ByteSize), at which a request body must arrive, kept over a sliding
	// window: each byte earns the body 1/rate seconds of waiting, at most
	// MinRateGrace plus MinRateWindow banked, and the body starts with
	// MinRateGrace. A body that stops is so cut within MinRateGrace plus
	// MinRateWindow of its last byte, however much it sent before; time
	// spent waiting on the upstream does not count. A cut body is
	// answered 408 when nothing was answered yet, else its connection is
	// closed. Default 240 (when unset); zero turns the check off.
	MinBodyRate ByteSize `yaml:"min_body_rate"`
	// MinResponseRate is the least rate, in bytes per second (units as
	// ByteSize), at which a client must read a response. With the
	// wakegate loop (http1_server: wakegate) on plain HTTP it is kept in
	// time across the response: each byte the kernel takes for the client
	// earns it time at this rate, at most MinRateGrace (and up to 2s of
	// slack) ahead, so a client that stops reading is cut within about
	// the grace and 3s of the kernel last taking a byte for it, one at
	// half the rate within about twice that, whatever the body size,
	// spliced or copied. Elsewhere (net/http, TLS, HTTP/2), where a timed
	// out write cannot go on, a response goes out in pieces of about a
	// second's worth at this rate (at least 32KiB, 64KiB when spliced, at
	// most 1MiB), each to be taken within MinRateGrace plus its size (and
	// 4KiB the server may hold) at this rate: a slower reader is cut
	// within the grace plus about a piece's time (2.5 min for a 32KiB
	// piece at 240B/s). WebSockets are not checked. Default 240 (when
	// unset); zero turns the check off.
	MinResponseRate ByteSize `yaml:"min_response_rate"`
	// GCHeadroom is how far the heap may grow past what is live before
	// Go's collector runs again, while the live heap is smaller than
	// this (units as ByteSize); a larger heap collects as GOGC's default
	// does, each time it has doubled. It spends at most this much memory
	// to collect less often: a gateway's live heap is small, and with
	// GOGC's default it collects every few MiB. The memory is spent only
	// while the gateway allocates: half a second after a burst it goes
	// back to the system, or up to 30 s after while bursts keep coming
	// soon after it went back (growing into it again costs page faults).
	// Default (when unset):
	// 32MiB, or a sixteenth of the memory the gateway may use (its
	// cgroup's limit, else the machine's memory) when that is less; 0
	// leaves the collector at GOGC's default. Ignored when the GOGC
	// environment variable is set. Read at start.
	GCHeadroom ByteSize `yaml:"gc_headroom"`
	// MinRateGrace is the time a body or a response write is allowed
	// before MinBodyRate and MinResponseRate apply, and how far a reader
	// may fall behind MinResponseRate. Default 5s; zero means the
	// default.
	MinRateGrace time.Duration `yaml:"min_rate_grace"`
	// MinRateWindow is how much waiting a request body's earlier bytes
	// may bank for a later stall, beyond MinRateGrace (see MinBodyRate).
	// Default 5s; zero means the default.
	MinRateWindow time.Duration `yaml:"min_rate_window"`
	// MaxConnsPerClient caps the open connections of one client IP. A
	// connection past the cap is closed at once and counted in
	// wakegate_conns_refused_total. A trusted proxy's connections are not
	// capped; each request it forwards counts, while it runs, for the
	// client named in X-Forwarded-For, and one past the cap gets 429
	// too_many_connections (counted the same). Default 1024; zero means
	// the default.
	MaxConnsPerClient int `yaml:"max_conns_per_client"`
	// TrustedProxies are the CIDRs whose X-Forwarded-* and X-Request-Id
	// headers are trusted; a bare address is a network of one. A trusted
	// peer names the client every limit counts, so never trust an address
	// an exec home can connect from (loopback, any address of this
	// machine): check-config and the start warn of it. Default none: they
	// are always set afresh.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// WebSocketOrigins are the Origin values (scheme://host[:port]) allowed to
	// open WebSockets, besides the request's own host. Default none: same
	// host only. "*" allows any origin.
	WebSocketOrigins []string `yaml:"websocket_origins"`
	// RootRedirect is where GET / on the public listener sends visitors
	// (302), an absolute http(s) URL or a path starting with /. Default
	// none: / answers a small page that says what this gateway serves.
	RootRedirect string `yaml:"root_redirect"`

	trusted           []*net.IPNet
	gcHeadroomDefault bool // GCHeadroom was unset: the start sizes it from the machine's memory
}

// ProxyConfig tunes forwarding to upstreams.
type ProxyConfig struct {
	// DialTimeout bounds connecting to an upstream. Default 5s; zero means
	// the default.
	DialTimeout time.Duration `yaml:"dial_timeout"`
	// ResponseHeaderTimeout bounds waiting for an upstream's response
	// headers (504 past it; on a busy connection, up to an eighth of it
	// and at most a second later). Default 60s; zero means the default.
	ResponseHeaderTimeout time.Duration `yaml:"response_header_timeout"`
	// HomeResponseHeaderTimeout bounds waiting for a home's response
	// headers (504 past it, with response_header_timeout's slack on a busy
	// connection); the home's warm verdict is dropped then, so
	// the next request proves the home again instead of hanging on it.
	// Default 30s; zero means the default.
	HomeResponseHeaderTimeout time.Duration `yaml:"home_response_header_timeout"`
	// MaxIdleConnsPerHost is the keep-alive pool per upstream, in
	// connections. Default 256; zero means the default.
	MaxIdleConnsPerHost int `yaml:"max_idle_conns_per_host"`
	// MaxConnsPerHome caps the plain requests forwarded to one home at
	// once, and so the upstream connections they use: a burst on one home
	// (the callers a wake releases together) reuses that many warm
	// connections instead of dialling one per caller. A request takes its
	// slot once its body has been read ahead (body_buffer, body_spool) and
	// holds it until its answer has been relayed. WebSockets and other
	// upgrades are not counted. A request past the cap waits for a slot in
	// order of arrival, for as long as its caller stays and at most
	// wake.wake_timeout, then gets 503 home_at_capacity. Keep
	// max_idle_conns_per_host at least as large, or the connections past
	// the keep-alive pool are closed after each use. Default 256 (when
	// unset); zero means no cap.
	MaxConnsPerHome int `yaml:"max_conns_per_home"`
	// BodyBuffer is how much of a request body to a home, in bytes (units
	// as ByteSize), is read into memory before the request takes one of
	// the home's forwarding slots (max_conns_per_home): a client that
	// uploads slowly then holds only its own connection, and the home
	// gets the body at once when it is whole. The rest of a longer body
	// goes to a temporary file (body_spool). Default 64KiB (when unset);
	// zero turns request buffering off: a body arrives while its request
	// holds a slot.
	BodyBuffer ByteSize `yaml:"body_buffer"`
	// BodySpool is how much more of a request body to a home, in bytes
	// (units as ByteSize), is read ahead into a temporary file past
	// body_buffer before the request takes a slot. A longer body is
	// forwarded as it arrives once that much is buffered, holding its
	// slot meanwhile. The files are unlinked as soon as they are made.
	// Default 32MiB (when unset); zero keeps bodies off the disk: past
	// body_buffer, a body arrives while its request holds a slot.
	BodySpool ByteSize `yaml:"body_spool"`
	// BodyBudgetClient is the most one client address's request bodies
	// may hold at once in the read-ahead (body_buffer in memory and
	// body_spool on disk together), in bytes (units as ByteSize). A body
	// is admitted with what it can hold at most (its length up to
	// body_buffer plus body_spool; a body of unknown length reserves its
	// memory first and its spool a MiB at a time, and streams the rest
	// when a piece does not fit). A new body past the budget gets 503
	// body_budget_full with Retry-After (413 body_over_budget when it
	// could never fit); bodies already admitted are never touched. This
	// is what keeps one client from holding the spool disk: a body that
	// stalls is cut by min_body_rate within min_rate_grace and
	// min_rate_window, and until then it counts here. Default 128MiB
	// (when unset); zero turns the per-client budget off. Shown in status
	// and in wakegate_body_budget_bytes.
	BodyBudgetClient ByteSize `yaml:"body_budget_client"`
	// BodyBudgetTotal is the same budget over all clients together.
	// Default 1GiB (when unset); zero turns it off.
	BodyBudgetTotal ByteSize `yaml:"body_budget_total"`
	// BodySpoolDir is the folder of those temporary files. Default empty:
	// the system's temporary directory ($TMPDIR, else /tmp).
	BodySpoolDir string `yaml:"body_spool_dir"`
	// IdleConnTimeout closes pooled upstream connections idle this long.
	// Default 90s; zero means the default.
	IdleConnTimeout time.Duration `yaml:"idle_conn_timeout"`
	// RelayHeader is the header that carries a home's relay token to it.
	// Default "X-Wakegate-Relay"; empty means the default.
	RelayHeader string `yaml:"relay_header"`
	// HostHeader is the Host a forwarded request carries
	// (docs/headers.md): "auto" (the client's, except toward an https
	// upstream, which gets its own address), "client" (the client's,
	// toward every upstream), "upstream" (the upstream's host:port), or a
	// fixed host[:port]. The client's Host lets an app that compares
	// Origin with Host (Jupyter, code-server) accept the browser's
	// requests with no setting of its own. Default "auto"; empty means
	// the default.
	HostHeader string `yaml:"host_header"`
	// HostHeaders override HostHeader per route, with the same values:
	// homes by target, apps by slug (an app inside a home follows its
	// own rule, not its home's). Default none.
	HostHeaders HostHeaderRoutes `yaml:"host_headers"`
}

// HostHeaderRoutes are per-route Host rules (ProxyConfig.HostHeaders).
type HostHeaderRoutes struct {
	// Homes are rules for /node/{target}, by target. Default none.
	Homes map[string]string `yaml:"homes"`
	// Apps are rules for /apps/{slug} (and an app's own host), by slug.
	// Default none.
	Apps map[string]string `yaml:"apps"`
}

// WakeConfig configures the wake engine.
type WakeConfig struct {
	// WarmTTL is how long a proven wake is trusted with no store read,
	// provider call or probe. Default 10s; zero means the default.
	WarmTTL time.Duration `yaml:"warm_ttl"`
	// ReadyTimeout bounds one wake: provider start plus readiness probe.
	// Default 30s; zero means the default.
	ReadyTimeout time.Duration `yaml:"ready_timeout"`
	// WakeTimeout is how long API, asset and WebSocket callers are held
	// while their home wakes before 503. Default 60s; zero means the
	// default.
	WakeTimeout time.Duration `yaml:"wake_timeout"`
	// Hold is how long a browser navigation waits for a wake before it gets
	// the waiting page instead. Default 1s (when unset); zero sends the
	// page at once.
	Hold time.Duration `yaml:"hold"`
	// IdleTimeout suspends a home that has had no session this long.
	// Default 5m (when unset); zero means never.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// MaxConcurrent caps wakes running at once across all homes. A wake
	// beyond it waits for a slot, up to wake_timeout, and its ready_timeout
	// counts from when it gets one. Default 16; zero means the default; at
	// least 1.
	MaxConcurrent int `yaml:"max_concurrent"`
	// RetryAfter is the Retry-After value, in whole seconds, sent with 503
	// answers for homes that are not ready. Default 5s; zero means the
	// default.
	RetryAfter time.Duration `yaml:"retry_after"`
	// FailureBackoff is the pause a home's wakes are held to after a failed
	// wake (the first failure lets one more wake start at once); it doubles
	// with each failure in a row, up to FailureBackoffMax. Requests obey
	// it (a waiting page's status never wakes a home); an operator's wake (POST
	// /admin/homes/{id}/wake) does not. Default 2s; zero means the default.
	FailureBackoff time.Duration `yaml:"failure_backoff"`
	// FailureBackoffMax caps the doubled failure backoff, so a home that
	// failed for a while is tried again within this long once it is fixed.
	// Default 5m, or failure_backoff when that is longer; zero means the
	// default; at least failure_backoff.
	FailureBackoffMax time.Duration `yaml:"failure_backoff_max"`
	// NoWakeUserAgents are regular expressions; a request whose User-Agent
	// matches one never wakes a sleeping home. Default (when unset):
	// DefaultNoWakeUserAgents; an empty list turns the rule off.
	NoWakeUserAgents []string `yaml:"no_wake_user_agents"`
	// NoWakePaths are sub-paths (after /node/{target}) that never wake a
	// sleeping home. Default (when unset) ["/favicon.ico", "/robots.txt"];
	// an empty list turns the rule off.
	NoWakePaths []string `yaml:"no_wake_paths"`
	// Probe is how readiness is proven; it documents its own fields.
	Probe ProbeConfig `yaml:"probe"`
	// WaitingPage is a file holding the operator's own waiting page, an
	// html/template (docs/waiting-page.md lists its variables; every value
	// is escaped). Default none (and when empty): the built-in page of
	// waiting_theme. A home's or app's own waiting_theme wins over it.
	WaitingPage string `yaml:"waiting_page"`
	// WaitingTheme is the built-in waiting page shown for every home and
	// app without a waiting_theme of its own: "default" (light or dark as
	// the browser prefers), "plain", "dark" or "minimal" (for an iframe;
	// docs/waiting-page.md shows them). Not together with waiting_page.
	// Default (and when empty): "default".
	WaitingTheme string `yaml:"waiting_theme"`
	// Schedule is the running hours of every home without a schedule of
	// its own (ScheduleConfig documents its fields). Default none.
	Schedule *ScheduleConfig `yaml:"schedule"`

	noWakeUA    []*regexp.Regexp
	waitingTmpl *web.WaitingTemplate // WaitingPage parsed; nil for the built-in page
}

// ProbeConfig configures readiness probes.
type ProbeConfig struct {
	// Kind is "auto", "ws", "http" or "tcp". Default "auto"; empty means
	// the default. Every kind first needs the home's port to accept a
	// connection. "auto" passes on the first of a WebSocket upgrade to
	// /node/{target} that yields a first frame or stays open through
	// Settle, a GET of Path answered 2xx or 3xx, or a GET of the health
	// path of an app inside the home answered as its kind's rules accept
	// (the app's direct check path: its health path with strip_prefix;
	// without it, that path under /apps/{slug} and at the app's base
	// path itself): it fits plain HTTP
	// servers and WebSocket services alike. The upgrade goes first, its
	// handshake bounded by WSTimeout. A home that completes the upgrade
	// is judged by the WebSocket alone: a socket closed within Settle
	// fails the attempt, whatever a GET would answer; the GETs are tried
	// only when the upgrade is refused with an ordinary HTTP answer, left
	// unanswered for WSTimeout or closed without an answer. An auto probe that gets
	// nothing but 404s (the upgrade and every GET) for 5s ends the wake
	// there (wake_failed, with a hint), rather than at the ready timeout;
	// a home that 404s for a moment while it boots is still waited
	// for. "ws" is the upgrade alone,
	// "http" the GET of Path alone (2xx or 3xx), "tcp" the connection
	// alone.
	Kind string `yaml:"kind"`
	// Path is the path of the http and auto probes' GET; {target} is
	// replaced by the home's target. Default "/node/{target}/"; empty
	// means the default.
	Path string `yaml:"path"`
	// AttemptTimeout bounds one probe attempt. Default 2s; zero means the
	// default.
	AttemptTimeout time.Duration `yaml:"attempt_timeout"`
	// WSTimeout bounds the WebSocket handshake of an auto probe: an
	// upgrade the home receives but leaves unanswered that long (a dev
	// server such as Vite that wants its own subprotocol), or closes
	// without an answer, falls back to the GETs in the same attempt, and
	// the wake's log line says so with the setting that skips the wait
	// (probe kind http). At most half of AttemptTimeout is used. Default
	// 1s; zero means the default.
	WSTimeout time.Duration `yaml:"ws_timeout"`
	// Settle is how long a ws or auto probe's socket must stay open when no
	// first frame arrives: long enough that a broker which accepts the
	// upgrade and then closes it (1011) is caught. Default 300ms; zero
	// means the default.
	Settle time.Duration `yaml:"settle"`
	// MinPause is the first pause between attempts; it doubles up to
	// MaxPause. Default 2ms; zero means the default.
	MinPause time.Duration `yaml:"min_pause"`
	// MaxPause caps the pause between attempts. Default 100ms; zero means
	// the default.
	MaxPause time.Duration `yaml:"max_pause"`
	// PortWatch is how often a home's port is checked during a pause after
	// a refused connection, so the probe runs the moment the home listens.
	// Default 2ms (when unset); zero turns the watch off (pauses run their
	// full length).
	PortWatch time.Duration `yaml:"port_watch"`
}

// ExecConfig configures the exec provider, which runs homes as local
// processes.
type ExecConfig struct {
	// Command is the command template. Placeholders: {port} (a free loopback
	// port between 20000 and the kernel's ephemeral range, which no other
	// program's outgoing connection can take), {target}, {version}, {id}, {data_dir} (the home's own folder),
	// {self} (this gateway's executable) and {endpoint}
	// (http://127.0.0.1:{port}). A command that names {socket} listens on
	// a Unix socket instead of a port: {socket} is the absolute path
	// {data_dir}/.wakegate.sock (at most 107 bytes, checked), {endpoint} is
	// then unix://{socket}, no port is chosen and the gateway reaches the
	// home only through the socket, inside the home's 0700 folder: with
	// homes of their own users, no other home can connect to it. Default
	// (and when empty): the built-in demo home.
	Command []string `yaml:"command"`
	// StopGrace is the pause between SIGTERM and SIGKILL. Default 5s; zero
	// means the default.
	StopGrace time.Duration `yaml:"stop_grace"`
	// LogMaxBytes caps each home's log file, in bytes (units as ByteSize).
	// Default 1MiB; zero means the default.
	LogMaxBytes ByteSize `yaml:"log_max_bytes"`
	// RestartBudget is how many unexpected exits are restarted per
	// RestartWindow before the home is marked failed. Default 3; zero
	// means the default.
	RestartBudget int `yaml:"restart_budget"`
	// RestartWindow is the window of RestartBudget. Default 60s; zero
	// means the default.
	RestartWindow time.Duration `yaml:"restart_window"`
	// RestartPause is the pause before restarting a process that exited
	// within 10s of its start, doubled for each restart already made in
	// RestartWindow, up to 5s: a home that fails at once gets its restarts
	// spread over a second or so (100ms, 200ms, 400ms with the defaults),
	// time for what it waits on to come up, instead of spending them in a
	// few milliseconds. A process that ran longer is restarted at once.
	// Default 100ms; zero means the default.
	RestartPause time.Duration `yaml:"restart_pause"`
	// SuspendSignal suspends homes with SIGSTOP (and resumes with SIGCONT)
	// instead of stopping them. Default false.
	SuspendSignal bool `yaml:"suspend_signal"`
	// KeepRunningOnShutdown leaves home processes running when the gateway
	// shuts down, for the next start to adopt. Default false: after the
	// drain, shutdown stops every exec home's process and keeps its stored
	// desired state, so the next start wakes the homes that should run.
	KeepRunningOnShutdown bool `yaml:"keep_running_on_shutdown"`
	// VersionCommand, if set, is run to learn the version a home really
	// runs. Default none: GET /version on the home.
	VersionCommand []string `yaml:"version_command"`
	// Env are extra KEY=VALUE entries for homes' environment (and the
	// version command's). A home's environment is built from nothing, never
	// from the gateway's own (which holds its secrets): PATH (the gateway's,
	// or a standard one), HOME (the home's folder), TMPDIR, LANG, LANGUAGE,
	// LC_* and TZ, WAKEGATE_PORT, WAKEGATE_TARGET, WAKEGATE_VERSION,
	// WAKEGATE_HOME (its id) and WAKEGATE_RELAY_TOKEN (its own relay token,
	// when it has one), then inherit_env, then these, then the home's own
	// env. Default none.
	Env []string `yaml:"env"`
	// InheritEnv names variables of the gateway's environment that every
	// home (and the version command) gets as they are, on purpose; an unset
	// one is left out. For one home only, give it env: ["NAME=${NAME}"].
	// Default none.
	InheritEnv []string `yaml:"inherit_env"`
	// Users says which user homes run as.
	Users ExecUsersConfig `yaml:"users"`
	// SocketActivation starts every exec home with systemd's socket
	// activation unless the home says otherwise (its socket_activation):
	// the gateway binds the home's loopback port itself, passes the
	// listening socket as descriptor 3 (LISTEN_FDS=1, LISTEN_PID,
	// LISTEN_FDNAMES=http) and keeps it across suspends, so the port never
	// changes and requests sent while the home boots wait in the socket's
	// accept queue. {port} still names the port. The gateway writes
	// LISTEN_PID into the home's environment itself before the program's
	// first instruction (a traced start); where the kernel refuses tracing
	// (a seccomp filter, kernel.yama.ptrace_scope 3) it starts the home
	// through /bin/sh instead, one exec more, and logs that once. Not for
	// {socket} homes. Default false: the home binds {port} itself.
	SocketActivation bool `yaml:"socket_activation"`
	// Containment says how every process a home starts (however it
	// detaches: setsid, a double fork, a daemon) is found and stopped with
	// the home: "cgroup" (a cgroup v2 per home, stopped with cgroup.kill;
	// the gateway refuses to start where it cannot create one), "subreaper"
	// (the gateway adopts the home's orphans and knows them by their
	// WAKEGATE_HOME) or "auto": a cgroup where the gateway may create one
	// (root, with cgroup v2 mounted, pure or hybrid), else a subreaper.
	// status says which is used and why. Default auto.
	Containment string `yaml:"containment"`
	// PidsMax caps how many processes and threads each exec home may
	// have at once, all its processes together: a fork past it fails
	// (EAGAIN), so a fork bomb in one home leaves the gateway and the
	// other homes serving. It is pids.max of the home's cgroup (v2, or the
	// cgroup v1 pids hierarchy) where it has one, else RLIMIT_NPROC of its
	// own uid (only with a user per home). A home's options.pids_max
	// overrides it; status shows each home's cap and what holds it.
	// Default 1024; zero means the default; negative: no cap.
	PidsMax int `yaml:"pids_max"`
}

// ExecUsersConfig says which user each exec home runs as.
type ExecUsersConfig struct {
	// Mode is "auto" (default, and when empty): when the gateway runs as
	// root, each home runs as a user of its own, a uid from Range with the
	// gid of the same number and no supplementary group, and owns its
	// folder (mode 0700); data_dir and data_dir/homes become 0711 and the
	// gateway keeps each home's log and process record in data_dir/exec
	// (0700), so a home reads neither the store, nor secret files, nor
	// another home's folder. A root gateway never runs a home as root in
	// this mode: where data_dir lies under a folder other users cannot
	// pass (under /root, a mktemp -d folder), the home folders go to
	// machine_dir/homes/<hash of data_dir> (data_dir/homes links there),
	// and where they cannot run the wakegate binary of a {self} command
	// (go run's build folder), they run a root-owned copy of it in
	// machine_dir/bin; where even that fails, every exec home is refused
	// with the cause and the fix (log, status, the wake's error). A
	// gateway that is not root runs homes as its own user and says so at
	// start and in status. "dynamic": the same, but the gateway refuses to
	// start where homes cannot have users of their own (also when it is
	// not root). "off": homes run as the gateway's user, on purpose; under
	// a root gateway they run as root, and check-config, the start log and
	// status say so.
	Mode string `yaml:"mode"`
	// Range is the uids handed to homes, "FIRST-LAST". A home keeps the uid
	// it was given (data_dir/exec/users.json). Every root gateway of the
	// machine registers the uids it hands out in machine_dir/uids.json
	// (under a lock), so no uid is ever held by two homes, of one gateway
	// or of two, whatever their ranges; uids naming accounts of the system
	// and uids a live process runs as are skipped. A uid of this
	// gateway's users file that the registry gives another gateway's home
	// is refused at start, naming both. Default "61184-65519".
	Range string `yaml:"range"`
	// MachineDir is the machine-wide folder of root gateways (root-owned,
	// 0711, made when missing; refused when another user owns or may
	// write to it or a folder above it): the uid registry, the home
	// folders of a data_dir other users cannot pass, and copies of the
	// wakegate binary for {self} commands. Every gateway of one machine
	// should use the same one. Default "/var/lib/wakegate".
	MachineDir string `yaml:"machine_dir"`

	first, last uint32 // Range, parsed
}

// AdminConfig configures the admin listener: the admin API, the dashboard
// and /metrics. It is never served on the public listener.
type AdminConfig struct {
	// Listen is the admin listener's address, host:port. Default
	// "127.0.0.1:8081" (when unset); an empty string turns the admin
	// listener off. It is also off while Tokens holds no token. Any
	// address other than loopback (":8081", "0.0.0.0:8081", a LAN
	// address) is served, with a warning at start and in check-config:
	// every machine that reaches it may try tokens.
	Listen string `yaml:"listen"`
	// Socket is the path of the admin API's Unix socket, the CLI's
	// default way in. Only root, the gateway's own user and the members
	// of SocketGroup can connect (the kernel names each peer; others are
	// refused), and they need no token: such a peer can read the token
	// anyway. Default "admin.sock" in data_dir (when unset), served when
	// it can be (a path too long for a socket is skipped with a warning);
	// a path set here must work or the gateway does not start; an empty
	// string turns the socket off.
	Socket string `yaml:"socket"`
	// SocketGroup is a group (name or gid) whose members may use the
	// admin socket too: the socket then has mode 0660 and that group.
	// Default none: mode 0600, the gateway's own user and root only.
	SocketGroup string `yaml:"socket_group"`
	// Tokens are the bearer tokens accepted on every admin route (the
	// dashboard's page itself loads without one): secret references
	// "env:NAME" or "file:PATH", or the token itself. Each must be at least
	// 16 characters. Empty entries are skipped, so "${VAR:-}" turns the
	// listener off while VAR is unset. Default (when unset): the token in
	// the environment variable WAKEGATE_TOKEN, if it is set; else none.
	Tokens []string `yaml:"tokens"`
	// AllowedHosts are extra Host header values (host or host:port) the
	// admin listener answers, besides its own address (and, when it listens
	// on loopback or all interfaces, localhost, 127.0.0.1 and [::1] on its
	// port). Any other Host is refused (DNS rebinding). Default none.
	AllowedHosts []string `yaml:"allowed_hosts"`
	// AuthFailures is how many failed token checks one client IP may make
	// per minute before its further failures get 429 with Retry-After; all
	// clients together may make ten times as many. A valid token always
	// passes, whatever its client failed before. Default 10; zero means
	// the default; the burst is the same number.
	AuthFailures int `yaml:"auth_failures_per_minute"`

	tokens        []string // resolved, non-empty
	socketDefault bool     // Socket was unset: serve it only if it can be
	socketGID     int      // SocketGroup resolved; -1 for none
}

// RollConfig configures rolls: idle homes moving to the target version.
type RollConfig struct {
	// Mode is "lazy" (default: a stale home rolls at its next wake),
	// "eager" (also awake homes idle for IdleAfter) or "off". Empty means
	// the default.
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
	// ID identifies the home in state and logs. Required: 1-63 of
	// [a-z0-9._-] starting with a letter or digit.
	ID string `yaml:"id"`
	// Target is the name in /node/{target}. Default (and when empty): the
	// ID.
	Target string `yaml:"target"`
	// Provider runs the home: "exec" (default: a local process from
	// exec.command, or the home's own Command), "static" (always on at
	// Endpoint), or a provider configured under providers. Empty means the
	// default.
	Provider string `yaml:"provider"`
	// Endpoint is the base URL of a static home (short for options:
	// {endpoint: URL}). Required for static homes, not allowed for others.
	// Default none.
	Endpoint string `yaml:"endpoint"`
	// Command is this home's own command template, program first, with the
	// placeholders of exec.command. Default (when empty): exec.command, or
	// the roll target's command for the version the home runs; a home's
	// own command wins over a target's.
	Command []string `yaml:"command"`
	// Env are extra KEY=VALUE entries for this home's environment, after
	// exec.env. Default none.
	Env []string `yaml:"env"`
	// WorkingDir is this home's working directory, an absolute path.
	// Default (when empty): the home's own folder, data_dir/homes/{id}.
	WorkingDir string `yaml:"working_dir"`
	// SocketActivation starts this exec home with socket activation (true)
	// or without it (false): see exec.socket_activation, its default.
	// Short for options.socket_activation. Default: exec.socket_activation.
	SocketActivation bool `yaml:"socket_activation"`
	// Options are the home's provider-specific settings, a mapping that its
	// provider documents (static: endpoint; exec: user, an account of the
	// system the home runs as instead of the uid exec.users hands it, which
	// needs exec.users auto or dynamic under a root gateway and is never
	// root; memory_max, the memory of all the home's processes together in
	// bytes or with a unit such as "256MiB", past which the kernel kills a
	// process of the home; cpu_max, their CPU in cores, such as 0.5, past
	// which they are throttled. The two limits need a cgroup per home with
	// the memory or cpu controller, cgroup v2's or cgroup v1's: they are
	// refused where the machine has none; pids_max, the home's process
	// cap, which overrides exec.pids_max, negative for none; members, a
	// group of processes woken and stopped as one home, see docs/homes.md).
	// Default none.
	Options map[string]any `yaml:"options"`
	// Probe is how this home's readiness is proven: a kind ("auto", "ws",
	// "http" or "tcp"), or a mapping of kind, path (the http probe's path,
	// may contain {target}), statuses (the only HTTP statuses the GET of
	// an http or auto probe passes on; default 2xx and 3xx) and settle (a
	// ws probe's quiet window). Default
	// (and for every field left out): wake.probe's.
	Probe registry.HomeProbe `yaml:"probe"`
	// ReadyTimeout bounds this home's wakes, provider start plus probe.
	// Default (and zero): wake.ready_timeout.
	ReadyTimeout time.Duration `yaml:"ready_timeout"`
	// Version is the version the home runs when first started. Default
	// "1"; empty means the default.
	Version string `yaml:"version"`
	// RelayToken is a secret reference, "env:NAME" or "file:PATH", whose
	// value is sent to this home only, in the relay header. Default none.
	RelayToken string `yaml:"relay_token"`
	// IdleTimeout overrides wake.idle_timeout for this home. Default (when
	// unset): wake.idle_timeout; zero means never.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// DisplayName is what the waiting page calls the home, e.g. "Alice's
	// notebook"; at most 100 characters. Default (and when empty): the
	// target.
	DisplayName string `yaml:"display_name"`
	// WaitingTheme is the built-in waiting page of this home and of the
	// apps in it that have none of their own, one of wake.waiting_theme's
	// names; it wins over wake.waiting_theme and wake.waiting_page.
	// Default (and when empty): wake's page.
	WaitingTheme string `yaml:"waiting_theme"`
	// Schedule is the home's running hours, in place of wake.schedule;
	// schedule: {} turns wake.schedule off for the home. Default (when
	// unset): wake.schedule.
	Schedule *ScheduleConfig `yaml:"schedule"`

	socketActivationSet bool // SocketActivation was set by the home, not inherited
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

// resolveAdminToken resolves one admin.tokens entry: a secret reference
// or the token itself; "" for an empty entry.
func resolveAdminToken(ref string) (string, error) {
	ref = strings.TrimSpace(ref)
	if strings.HasPrefix(ref, "env:") || strings.HasPrefix(ref, "file:") {
		return provconf.ResolveSecret(ref)
	}
	return ref, nil
}
