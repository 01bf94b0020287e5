// Package demohome is the tiny built-in home that `wakegate demo-home` runs:
// an HTTP and WebSocket server used by the default config, the docs and the
// gateway's end-to-end tests.
//
// The same routes are served under two prefixes, /node/{target} (any target)
// and /apps/demo; the part after the prefix is the sub-path:
//
//	"" or "/"       GET: a small HTML page naming target, version and path;
//	                a WebSocket upgrade here is handled exactly like /ws
//	/ws             WebSocket: one text frame {"hello":target,"version":version},
//	                then every message is echoed back with its type
//	/whoami         JSON description of the request received (?echo=1 also
//	                copies every request header into the response as X-Echo-<Name>)
//	/sse            text/event-stream: ?n (default 3) events "data: <i>", i from 1,
//	                each flushed at once, ?interval (default 50ms) between them
//	/slow           waits ?d (default 1s), then 200 "slow done"
//	/status/{code}  that status (200-599) with a JSON body
//	/bytes/{n}      n bytes of body with Content-Length set
//	anything else   404 JSON
//
// Root routes: GET /version (the version as plain text, no trailing newline),
// GET /healthz ("ok", no trailing newline), GET /_demo/stats (JSON counters,
// see Stats). Every other path is 404 JSON.
//
// When a relay token is configured, requests under /node/ must carry it in
// the X-Wakegate-Relay header or get 401 JSON; /apps/demo and the root routes
// are open.
package demohome

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wakegate/wakegate/internal/endpoint"
)

// Defaults and names shared with the gateway and its tests.
const (
	// DefaultAddr is the listen address when none is given.
	DefaultAddr = "127.0.0.1:9000"
	// DefaultTarget is the target name when none is given.
	DefaultTarget = "demo"
	// DefaultVersion is the version reported when none is given.
	DefaultVersion = "dev"
	// RelayHeader is the request header that carries the relay token.
	RelayHeader = "X-Wakegate-Relay"
	// RelayTokenEnv is the environment variable ParseFlags reads the relay
	// token from when --relay-token is empty.
	RelayTokenEnv = "WAKEGATE_RELAY_TOKEN"
)

const (
	appsPrefix      = "/apps/demo"
	nodePrefix      = "/node/"
	statsPath       = "/_demo/stats"
	shutdownGrace   = 5 * time.Second  // in-flight HTTP requests get this long at shutdown
	notifyTimeout   = 5 * time.Second  // bound on the notify-ready POST
	closeWriteWait  = time.Second      // bound on writing a WebSocket close frame
	wsReadLimit     = 16 << 20         // largest WebSocket message echoed, bytes
	maxBodyBytes    = 1 << 30          // largest /bytes/{n}
	maxTrackedPaths = 10000            // distinct paths counted in Stats; the rest go under otherPathsKey
	otherPathsKey   = "(other)"        // Stats.Paths key for paths past maxTrackedPaths
	readHeaderLimit = 10 * time.Second // http.Server.ReadHeaderTimeout
)

// Options configure a demo home. The zero value of each field means its
// default, filled in by NewHandler and Run.
type Options struct {
	// Addr is the listen address, host:port; port 0 picks a free port
	// (flag --addr). Default DefaultAddr.
	Addr string
	// Target is the home's target name, sent in the WebSocket hello and shown
	// on the HTML page (flag --target). Informational only: routes accept any
	// {target}. Default DefaultTarget.
	Target string
	// Version is the version the home reports (flag --version).
	// Default DefaultVersion.
	Version string
	// BootDelay is how long Run waits before listening, to simulate a slow
	// boot (flag --boot-delay). Zero or negative means no delay.
	BootDelay time.Duration
	// ListenFD, when at least 3, is an inherited listening socket Run serves
	// on instead of listening on Addr (flag --listen-fd): socket activation,
	// where whoever starts the home made its socket before it, so that
	// connections made during the boot wait in the socket's accept queue.
	// The boot delay still runs before the first accept. Zero: none.
	ListenFD int
	// Unix, when set, is the path of a Unix socket Run listens on instead
	// of Addr (flag --unix), e.g. {socket} in an exec home's command. A
	// socket file left there by an earlier run is removed first; Run
	// removes its own when it returns. Empty: none.
	Unix string
	// FailOnce, when set, names a marker file: if it does not exist, Run
	// creates it and fails at once without listening (flag --fail-once),
	// so the home's first start fails and its restart succeeds.
	FailOnce string
	// RelayToken, when set, is required in header X-Wakegate-Relay on every
	// request under /node/ (flag --relay-token, or env WAKEGATE_RELAY_TOKEN
	// when the flag is empty). Empty means no check.
	RelayToken string
	// NotifyReady is a URL that Run POSTs to once after listening, with header
	// X-Wakegate-Relay set to RelayToken when that is set, and a JSON body
	// {"target","version","addr"} (flag --notify-ready). Best effort: the
	// outcome is only logged. Empty means no notification.
	NotifyReady string
	// RequestLog, when set, is a file to which the home appends a line
	// for every request it serves: the arrival time in Unix nanoseconds,
	// its pid and the path (flag --request-log). A fault test reads it to
	// learn which process got which request, and when. Empty: none.
	RequestLog string
}

// withDefaults returns o with every empty field set to its default.
func (o Options) withDefaults() Options {
	if o.Addr == "" {
		o.Addr = DefaultAddr
	}
	if o.Target == "" {
		o.Target = DefaultTarget
	}
	if o.Version == "" {
		o.Version = DefaultVersion
	}
	return o
}

// ParseFlags parses the demo-home command line. Errors name the flag at
// fault; -h or -help yields an error that wraps flag.ErrHelp and lists the
// flags.
func ParseFlags(args []string) (Options, error) {
	fs := flag.NewFlagSet("demo-home", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var o Options
	fs.StringVar(&o.Addr, "addr", DefaultAddr, "listen address, host:port (port 0 picks a free port)")
	fs.StringVar(&o.Target, "target", DefaultTarget, "the home's target name (informational: routes accept any target)")
	fs.StringVar(&o.Version, "version", DefaultVersion, "version to report")
	fs.DurationVar(&o.BootDelay, "boot-delay", 0, "wait this long before listening, e.g. 2s (0: none)")
	fs.StringVar(&o.RelayToken, "relay-token", "", "require this token in header "+RelayHeader+" under /node/ (default: env "+RelayTokenEnv+")")
	fs.StringVar(&o.NotifyReady, "notify-ready", "", "POST to this URL once after listening")
	fs.IntVar(&o.ListenFD, "listen-fd", 0, "serve on this inherited listening socket (a file descriptor, 3 or more) instead of listening on --addr")
	fs.StringVar(&o.Unix, "unix", "", "listen on a Unix socket at this path instead of --addr")
	fs.StringVar(&o.FailOnce, "fail-once", "", "if this marker file is missing, create it and exit with an error before listening")
	fs.StringVar(&o.RequestLog, "request-log", "", "append a line per request (unix nanoseconds, pid, path) to this file")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			var b strings.Builder
			fs.SetOutput(&b)
			fs.PrintDefaults()
			return Options{}, fmt.Errorf("demo-home: %w\nflags:\n%s", err, b.String())
		}
		return Options{}, fmt.Errorf("demo-home: %w", err)
	}
	if fs.NArg() > 0 {
		return Options{}, fmt.Errorf("demo-home: unexpected argument %q", fs.Arg(0))
	}
	if o.RelayToken == "" {
		o.RelayToken = os.Getenv(RelayTokenEnv)
	}
	if _, _, err := net.SplitHostPort(o.Addr); err != nil {
		return Options{}, fmt.Errorf("demo-home: flag --addr: %w", err)
	}
	if o.Target == "" {
		return Options{}, errors.New("demo-home: flag --target: must not be empty")
	}
	if strings.Contains(o.Target, "/") {
		return Options{}, fmt.Errorf("demo-home: flag --target: %q must not contain '/'", o.Target)
	}
	if o.Version == "" {
		return Options{}, errors.New("demo-home: flag --version: must not be empty")
	}
	if o.BootDelay < 0 {
		return Options{}, fmt.Errorf("demo-home: flag --boot-delay: %s is negative", o.BootDelay)
	}
	if o.ListenFD != 0 && o.ListenFD < 3 {
		return Options{}, fmt.Errorf("demo-home: flag --listen-fd: %d is standard input, output or error; an inherited socket is 3 or more", o.ListenFD)
	}
	if o.Unix != "" {
		if o.ListenFD != 0 {
			return Options{}, errors.New("demo-home: flags --unix and --listen-fd: give one listener, not both")
		}
		if len(o.Unix) > endpoint.MaxSocketPath {
			return Options{}, fmt.Errorf("demo-home: flag --unix: %s is %d bytes, more than the %d a Unix socket path allows", o.Unix, len(o.Unix), endpoint.MaxSocketPath)
		}
	}
	if o.NotifyReady != "" {
		u, err := url.Parse(o.NotifyReady)
		if err != nil {
			return Options{}, fmt.Errorf("demo-home: flag --notify-ready: %w", err)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return Options{}, fmt.Errorf("demo-home: flag --notify-ready: %q is not an http(s) URL", o.NotifyReady)
		}
	}
	return o, nil
}

// Stats are the demo home's counters, served as JSON at /_demo/stats.
type Stats struct {
	// Requests counts every request received except those under /_demo/.
	Requests int64 `json:"requests"`
	// WSUpgrades counts completed WebSocket upgrades.
	WSUpgrades int64 `json:"ws_upgrades"`
	// WSOpen is the number of WebSocket connections open now.
	WSOpen int64 `json:"ws_open"`
	// ListeningAtUnixNano is when Run started listening, in Unix nanoseconds;
	// 0 before that, and always 0 for a Handler not run by Run.
	ListeningAtUnixNano int64 `json:"listening_at_unix_nano"`
	// Paths counts requests by URL path (decoded), with the same exclusions
	// as Requests. Past 10000 distinct paths, new ones count under "(other)".
	Paths map[string]int64 `json:"paths"`
}

// Handler serves the demo home's routes. Create it with NewHandler; it is
// safe for concurrent use.
type Handler struct {
	opts     Options
	upgrader websocket.Upgrader

	mu          sync.Mutex
	requests    int64
	wsUpgrades  int64
	listeningAt int64
	paths       map[string]int64
	conns       map[*websocket.Conn]struct{}
	closing     bool           // set by CloseWebSockets: later upgrades are closed at once
	wsWG        sync.WaitGroup // one per tracked WebSocket handler
	pages       int64          // pages served (servePage)
	started     time.Time      // when the handler was made: the home's start
	reqLog      io.Writer      // Options.RequestLog, opened by Run; nil: none
}

// NewHandler returns a Handler for o, with empty fields set to their defaults.
func NewHandler(o Options) *Handler {
	return &Handler{
		opts: o.withDefaults(),
		upgrader: websocket.Upgrader{
			// The demo home accepts any Origin: the gateway in front of it
			// decides who may connect.
			CheckOrigin: func(*http.Request) bool { return true },
		},
		paths:   make(map[string]int64),
		conns:   make(map[*websocket.Conn]struct{}),
		started: time.Now(),
	}
}

// Stats returns a snapshot of the counters.
func (h *Handler) Stats() Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	paths := make(map[string]int64, len(h.paths))
	for p, n := range h.paths {
		paths[p] = n
	}
	return Stats{
		Requests:            h.requests,
		WSUpgrades:          h.wsUpgrades,
		WSOpen:              int64(len(h.conns)),
		ListeningAtUnixNano: h.listeningAt,
		Paths:               paths,
	}
}

// CloseWebSockets sends a going-away close frame to every open WebSocket,
// closes it, and waits until their handlers have returned. WebSockets
// upgraded afterwards are closed at once. Run calls it on shutdown, because
// http.Server.Shutdown does not track hijacked connections.
func (h *Handler) CloseWebSockets() {
	h.mu.Lock()
	h.closing = true
	conns := make([]*websocket.Conn, 0, len(h.conns))
	for c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	for _, c := range conns {
		closeGoingAway(c)
	}
	h.wsWG.Wait()
}

// closeGoingAway writes a going-away close frame (bounded by closeWriteWait)
// and closes the connection. Safe to call concurrently with the connection's
// reader and writer.
func closeGoingAway(c *websocket.Conn) {
	msg := websocket.FormatCloseMessage(websocket.CloseGoingAway, "demo home shutting down")
	_ = c.WriteControl(websocket.CloseMessage, msg, time.Now().Add(closeWriteWait))
	_ = c.Close()
}

func (h *Handler) markListening(t time.Time) {
	h.mu.Lock()
	h.listeningAt = t.UnixNano()
	h.mu.Unlock()
}

func (h *Handler) count(path string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.reqLog != nil {
		fmt.Fprintf(h.reqLog, "%d %d %s\n", time.Now().UnixNano(), os.Getpid(), path)
	}
	h.requests++
	if _, ok := h.paths[path]; !ok && len(h.paths) >= maxTrackedPaths {
		path = otherPathsKey
	}
	h.paths[path]++
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	if strings.HasPrefix(p, "/_demo/") {
		if p != statsPath {
			notFound(w, r)
			return
		}
		if allowGet(w, r) {
			writeJSON(w, http.StatusOK, h.Stats())
		}
		return
	}
	h.count(p)
	switch {
	case strings.HasPrefix(p, nodePrefix):
		if !h.relayOK(r) {
			writeJSON(w, http.StatusUnauthorized, errorBody{Error: "missing or wrong " + RelayHeader + " header", Path: p})
			return
		}
		rest := p[len(nodePrefix):]
		target, sub, _ := strings.Cut(rest, "/")
		if target == "" {
			notFound(w, r)
			return
		}
		if sub != "" || strings.HasSuffix(rest, "/") {
			sub = "/" + sub
		}
		h.serveSub(w, r, sub)
	case p == appsPrefix || strings.HasPrefix(p, appsPrefix+"/"):
		h.serveSub(w, r, p[len(appsPrefix):])
	case p == "/version":
		if allowGet(w, r) {
			writeText(w, h.opts.Version)
		}
	case p == "/healthz":
		if allowGet(w, r) {
			writeText(w, "ok")
		}
	default:
		notFound(w, r)
	}
}

func (h *Handler) relayOK(r *http.Request) bool {
	if h.opts.RelayToken == "" {
		return true
	}
	got := r.Header.Get(RelayHeader)
	return subtle.ConstantTimeCompare([]byte(got), []byte(h.opts.RelayToken)) == 1
}

// serveSub serves a sub-path: what follows /node/{target} or /apps/demo.
func (h *Handler) serveSub(w http.ResponseWriter, r *http.Request, sub string) {
	switch {
	case sub == "" || sub == "/":
		if websocket.IsWebSocketUpgrade(r) {
			h.serveWS(w, r)
			return
		}
		if allowGet(w, r) {
			h.servePage(w, r)
		}
	case sub == "/ws":
		h.serveWS(w, r)
	case sub == "/whoami":
		h.serveWhoami(w, r)
	case sub == "/sse":
		serveSSE(w, r)
	case sub == "/slow":
		serveSlow(w, r)
	case strings.HasPrefix(sub, "/status/"):
		serveStatus(w, r, sub[len("/status/"):])
	case strings.HasPrefix(sub, "/bytes/"):
		serveBytes(w, r, sub[len("/bytes/"):])
	default:
		notFound(w, r)
	}
}

var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html>
<head><meta charset="utf-8"><title>wakegate demo home {{.Target}}</title></head>
<body>
<h1>wakegate demo home</h1>
<p id="what">{{if .Gateway}}Served through wakegate. {{end}}{{if eq .Page 1}}This is the first page this home has served: it woke up {{.Uptime}} ago{{if .Gateway}}, most likely for this request{{end}}.{{else}}This home woke up {{.Uptime}} ago and has served {{.Page}} pages since.{{end}}</p>
<p id="wake"></p>
<p>target: <code>{{.Target}}</code></p>
<p>version: <code>{{.Version}}</code></p>
<p>path: <code>{{.Path}}</code></p>
<script>
// wakegate adds "Server-Timing: wake;dur=N" to an answer that waited for a wake.
try {
  const nav = performance.getEntriesByType("navigation")[0];
  const wake = nav && (nav.serverTiming || []).find(e => e.name === "wake");
  if (wake) document.getElementById("wake").textContent =
    "This request woke the home: the wake took " + Math.round(wake.duration) + " ms.";
} catch (e) {}
</script>
</body>
</html>
`))

func (h *Handler) servePage(w http.ResponseWriter, r *http.Request) {
	var b bytes.Buffer
	h.mu.Lock()
	h.pages++
	page := h.pages
	h.mu.Unlock()
	data := struct {
		Target, Version, Path, Uptime string
		Page                          int64
		Gateway                       bool
	}{h.opts.Target, h.opts.Version, r.URL.Path, time.Since(h.started).Round(time.Millisecond).String(), page,
		r.Header.Get("X-Forwarded-Proto") != ""}
	if err := pageTemplate.Execute(&b, data); err != nil {
		writeJSON(w, http.StatusInternalServerError, errorBody{Error: "rendering page: " + err.Error()})
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	_, _ = w.Write(b.Bytes())
}

// serveWS upgrades the request, sends the hello frame and echoes messages
// until the peer closes or CloseWebSockets runs.
func (h *Handler) serveWS(w http.ResponseWriter, r *http.Request) {
	conn, err := h.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // Upgrade has already answered with an HTTP error
	}
	if !h.track(conn) {
		closeGoingAway(conn)
		return
	}
	defer h.untrack(conn)
	conn.SetReadLimit(wsReadLimit)
	hello, err := json.Marshal(struct {
		Hello   string `json:"hello"`
		Version string `json:"version"`
	}{h.opts.Target, h.opts.Version})
	if err != nil {
		return
	}
	if err := conn.WriteMessage(websocket.TextMessage, hello); err != nil {
		return
	}
	for {
		mt, data, err := conn.ReadMessage()
		if err != nil {
			return // peer closed (the default close handler has replied) or the connection broke
		}
		if err := conn.WriteMessage(mt, data); err != nil {
			return
		}
	}
}

// track registers an upgraded connection; false means the handler is
// closing and the connection must be closed instead.
func (h *Handler) track(c *websocket.Conn) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.wsUpgrades++
	if h.closing {
		return false
	}
	h.conns[c] = struct{}{}
	h.wsWG.Add(1)
	return true
}

func (h *Handler) untrack(c *websocket.Conn) {
	_ = c.Close()
	h.mu.Lock()
	delete(h.conns, c)
	h.mu.Unlock()
	h.wsWG.Done()
}

// whoami is the /whoami answer.
type whoami struct {
	Method     string      `json:"method"`
	Path       string      `json:"path"`
	RawPath    string      `json:"raw_path"`
	RawQuery   string      `json:"raw_query"`
	RequestURI string      `json:"request_uri"`
	Host       string      `json:"host"`
	RemoteAddr string      `json:"remote_addr"`
	Target     string      `json:"target"`
	Headers    http.Header `json:"headers"`
	BodyBytes  int64       `json:"body_bytes"`
	// BeganUnixNano is when this process began (its packages' set-up,
	// before main), in Unix nanoseconds: the scale benchmark tells from
	// it how long after a request the home's program started.
	BeganUnixNano int64 `json:"began_unix_nano"`
}

// processBegan is when this process's packages were set up, just after
// its exec.
var processBegan = time.Now()

func (h *Handler) serveWhoami(w http.ResponseWriter, r *http.Request) {
	n, err := io.Copy(io.Discard, r.Body)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: "reading body: " + err.Error(), Path: r.URL.Path})
		return
	}
	if r.URL.Query().Get("echo") == "1" {
		for name, values := range r.Header {
			for _, v := range values {
				w.Header().Add("X-Echo-"+name, v)
			}
		}
	}
	writeJSON(w, http.StatusOK, whoami{
		Method:     r.Method,
		Path:       r.URL.Path,
		RawPath:    r.URL.RawPath,
		RawQuery:   r.URL.RawQuery,
		RequestURI: r.RequestURI,
		Host:       r.Host,
		RemoteAddr: r.RemoteAddr,
		Target:     h.opts.Target,
		Headers:    r.Header,
		BodyBytes:  n,

		BeganUnixNano: processBegan.UnixNano(),
	})
}

func serveSSE(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	n := 3
	if s := q.Get("n"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 {
			writeJSON(w, http.StatusBadRequest, errorBody{Error: fmt.Sprintf("query n: %q is not a count", s), Path: r.URL.Path})
			return
		}
		n = v
	}
	interval, ok := durationQuery(w, r, "interval", 50*time.Millisecond)
	if !ok {
		return
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return
	}
	for i := 1; i <= n; i++ {
		if i > 1 && !sleepCtx(r.Context(), interval) {
			return // the client went away
		}
		if _, err := fmt.Fprintf(w, "data: %d\n\n", i); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

func serveSlow(w http.ResponseWriter, r *http.Request) {
	d, ok := durationQuery(w, r, "d", time.Second)
	if !ok {
		return
	}
	if !sleepCtx(r.Context(), d) {
		return // the client went away
	}
	writeText(w, "slow done")
}

func serveStatus(w http.ResponseWriter, r *http.Request, s string) {
	code, err := strconv.Atoi(s)
	if err != nil || code < 200 || code > 599 {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: fmt.Sprintf("status %q is not a code in 200-599", s), Path: r.URL.Path})
		return
	}
	writeJSON(w, code, struct {
		Status int    `json:"status"`
		Text   string `json:"text"`
	}{code, http.StatusText(code)})
}

// filler is the body source for /bytes; it is never written to.
var filler = bytes.Repeat([]byte("wakegate"), 4096)

func serveBytes(w http.ResponseWriter, r *http.Request, s string) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > maxBodyBytes {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: fmt.Sprintf("byte count %q is not in 0-%d", s, maxBodyBytes), Path: r.URL.Path})
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	for n > 0 {
		chunk := filler
		if int64(len(chunk)) > n {
			chunk = chunk[:n]
		}
		if _, err := w.Write(chunk); err != nil {
			return
		}
		n -= int64(len(chunk))
	}
}

// durationQuery reads a non-negative Go duration from query key, or def when
// absent. On a bad value it answers 400 and returns false.
func durationQuery(w http.ResponseWriter, r *http.Request, key string, def time.Duration) (time.Duration, bool) {
	s := r.URL.Query().Get(key)
	if s == "" {
		return def, true
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: fmt.Sprintf("query %s: %q is not a non-negative duration", key, s), Path: r.URL.Path})
		return 0, false
	}
	return d, true
}

// sleepCtx waits d; false means ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

type errorBody struct {
	Error string `json:"error"`
	Path  string `json:"path,omitempty"`
}

func notFound(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusNotFound, errorBody{Error: "not found", Path: r.URL.Path})
}

// allowGet answers 405 and returns false unless the method is GET or HEAD.
func allowGet(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	writeJSON(w, http.StatusMethodNotAllowed, errorBody{Error: "method " + r.Method + " not allowed", Path: r.URL.Path})
	return false
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":"encoding response"}`)
	}
	b = append(b, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// writeText answers 200 with s as text/plain, adding no newline.
func writeText(w http.ResponseWriter, s string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(s)))
	_, _ = io.WriteString(w, s)
}

// lineLog writes whole lines to a writer shared by several goroutines.
type lineLog struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineLog) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = fmt.Fprintf(l.w, format+"\n", args...)
}

// listen returns the listener of o: the inherited socket ListenFD, a Unix
// socket at Unix, or a new one on Addr.
func listen(ctx context.Context, o Options) (net.Listener, error) {
	if o.ListenFD >= 3 {
		f := os.NewFile(uintptr(o.ListenFD), "inherited listener")
		if f == nil {
			return nil, fmt.Errorf("demo-home: --listen-fd %d: not an open file descriptor", o.ListenFD)
		}
		defer f.Close() // FileListener holds its own copy
		ln, err := net.FileListener(f)
		if err != nil {
			// The system call's own words say what the descriptor is
			// not: "bad file descriptor", "socket operation on
			// non-socket".
			cause := err
			var se *os.SyscallError
			if errors.As(err, &se) {
				cause = se.Err
			}
			return nil, fmt.Errorf("demo-home: --listen-fd %d: not an inherited listening socket (%w)", o.ListenFD, cause)
		}
		return ln, nil
	}
	var lc net.ListenConfig
	if o.Unix != "" {
		// Only a socket is removed: a mistyped path never costs a file.
		if fi, err := os.Lstat(o.Unix); err == nil && fi.Mode()&os.ModeSocket != 0 {
			if err := os.Remove(o.Unix); err != nil {
				return nil, fmt.Errorf("demo-home: --unix %s: remove the stale socket: %w", o.Unix, err)
			}
		}
		ln, err := lc.Listen(ctx, "unix", o.Unix)
		if err != nil {
			return nil, fmt.Errorf("demo-home: listen on %s: %w", o.Unix, err)
		}
		return ln, nil
	}
	ln, err := lc.Listen(ctx, "tcp", o.Addr)
	if err != nil {
		return nil, fmt.Errorf("demo-home: listen on %s: %w", o.Addr, err)
	}
	return ln, nil
}

// Run runs a demo home until ctx ends: it waits o.BootDelay (returning nil
// at once if ctx ends first, without ever listening), listens on o.Addr,
// writes the line "listening addr=<host:port> version=<version>" to logw,
// sends the notify-ready POST if configured, and serves. When ctx ends it
// stops accepting, closes open WebSockets, lets in-flight requests finish
// for up to 5 s, and returns nil once every goroutine it started has
// stopped. It returns an error only when it cannot listen or serve. A nil
// logw discards the log.
func Run(ctx context.Context, o Options, logw io.Writer) error {
	o = o.withDefaults()
	if logw == nil {
		logw = io.Discard
	}
	log := &lineLog{w: logw}

	if o.FailOnce != "" {
		if _, err := os.Stat(o.FailOnce); errors.Is(err, os.ErrNotExist) {
			if err := os.WriteFile(o.FailOnce, nil, 0o600); err != nil {
				return fmt.Errorf("demo-home: --fail-once: %w", err)
			}
			return errors.New("demo-home: failing this first start (--fail-once)")
		}
	}
	if o.BootDelay > 0 {
		log.printf("booting delay=%s", o.BootDelay)
		if !sleepCtx(ctx, o.BootDelay) {
			log.printf("stopped during boot")
			return nil
		}
	}
	if ctx.Err() != nil {
		return nil
	}

	ln, err := listen(ctx, o)
	if err != nil {
		return err
	}
	h := NewHandler(o)
	if o.RequestLog != "" {
		f, err := os.OpenFile(o.RequestLog, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("demo-home: --request-log: %w", err)
		}
		defer f.Close()
		h.reqLog = f
	}
	h.markListening(time.Now())
	srv := &http.Server{Handler: h, ReadHeaderTimeout: readHeaderLimit}
	serveDone := make(chan error, 1)
	go func() { serveDone <- srv.Serve(ln) }()
	addr := ln.Addr().String()
	log.printf("listening addr=%s version=%s", addr, o.Version)

	var notifyWG sync.WaitGroup
	if o.NotifyReady != "" {
		notifyWG.Add(1)
		go func() {
			defer notifyWG.Done()
			notifyReady(ctx, o, addr, log)
		}()
	}

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-serveDone:
	}

	// Shutdown order: close WebSockets first (Shutdown does not track
	// hijacked connections, and any upgrade from here on is closed at once),
	// then stop accepting and let in-flight requests finish up to the grace,
	// then cut what is left, then wait for the notifier.
	log.printf("shutting down")
	h.CloseWebSockets()
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close() // grace over: cut the remaining requests
	}
	if serveErr == nil {
		serveErr = <-serveDone
	}
	notifyWG.Wait()
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("demo-home: serve on %s: %w", addr, serveErr)
	}
	log.printf("stopped")
	return nil
}

// notifyReady POSTs once to o.NotifyReady and logs the outcome.
func notifyReady(ctx context.Context, o Options, addr string, log *lineLog) {
	body, err := json.Marshal(struct {
		Target  string `json:"target"`
		Version string `json:"version"`
		Addr    string `json:"addr"`
	}{o.Target, o.Version, addr})
	if err != nil {
		log.printf("notify-ready url=%s error=%q", o.NotifyReady, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(ctx, notifyTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.NotifyReady, bytes.NewReader(body))
	if err != nil {
		log.printf("notify-ready url=%s error=%q", o.NotifyReady, err.Error())
		return
	}
	req.Header.Set("Content-Type", "application/json")
	if o.RelayToken != "" {
		req.Header.Set(RelayHeader, o.RelayToken)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		log.printf("notify-ready url=%s error=%q", o.NotifyReady, err.Error())
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	log.printf("notify-ready url=%s status=%d", o.NotifyReady, resp.StatusCode)
}

var _ http.Handler = (*Handler)(nil)
