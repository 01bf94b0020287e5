package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/provider/all"
)

// The admin commands talk to a running gateway's admin listener:
//
//	wakegate status [--json]
//	wakegate home wake|suspend|roll|refresh ID
//	wakegate app refresh SLUG [--wait PHASE]
//	wakegate app start|stop|restart SLUG [--wait DURATION]
//
// The address and token come from --admin and --token, or WAKEGATE_ADMIN
// and WAKEGATE_TOKEN. Without an address, --config names the gateway by
// its config file: the admin socket it serves, else its admin listener
// and first token. Without either, the admin socket in
// $WAKEGATE_DATA_DIR or else ./data (the default data_dir) is used when it
// is there, else http://127.0.0.1:8081.
// The socket is used only when root, the CLI's own user or
// $WAKEGATE_ADMIN_OWNER owns it and listens on it (adminsock.go).
// On the socket the gateway knows the caller by its user, so no token is
// needed. Exit status: 0 healthy or done, 1 unhealthy or
// failed, 2 usage error; status exits 3 when it got no status to judge
// (statusNoAnswer).

const adminUsage = `admin commands (address: --admin or WAKEGATE_ADMIN, a URL, host:port or unix:PATH of the
admin socket; or --config FILE, the gateway's config: its admin socket, else its admin listener
and token; default the socket admin.sock in $WAKEGATE_DATA_DIR or ./data when it is there, else
http://127.0.0.1:8081;
token: --token or WAKEGATE_TOKEN, not needed on the socket):
  status [--json]                   the gateway's status, homes and apps; exit 0 healthy,
                                    1 something failed, 2 usage, 3 no answer from the admin API
  home wake|suspend|roll|refresh ID act on a home (refresh: ask its provider what state it is
                                    in and make the record agree; exit 1 when the provider
                                    did not say)
  app refresh SLUG [--wait PHASE]   refresh an app's status, optionally waiting for a phase
                                    (ready, stopped, starting or failed)
  app start|stop|restart SLUG [--wait DURATION]
                                    run the operation and wait (up to DURATION) until the
                                    app is ready (stopped for stop); exit 1 otherwise
`

// adminClient calls the admin API.
type adminClient struct {
	base  string
	token string // "" on the socket
	http  *http.Client
	// sockPath is the admin socket's path when the client uses it.
	sockPath string
}

// where names the admin API the client calls, for messages.
func (c *adminClient) where() string {
	if c.sockPath != "" {
		return "unix:" + c.sockPath
	}
	return c.base
}

// defaultAdminSocket is where the CLI looks for the admin socket when no
// address is given: in $WAKEGATE_DATA_DIR (the data_dir the shipped
// configs read) when it is set, else in the default data_dir, ./data.
func defaultAdminSocket() string {
	if d := os.Getenv("WAKEGATE_DATA_DIR"); d != "" {
		return filepath.Join(d, "admin.sock")
	}
	return filepath.Join("data", "admin.sock")
}

// authorize sets req's token, when the client has one.
func (c *adminClient) authorize(req *http.Request) {
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
}

// socketPath returns the admin socket path addr names (unix:PATH, or a
// path starting with / or .), or "".
func socketPath(addr string) string {
	if p, ok := strings.CutPrefix(addr, "unix:"); ok {
		return p
	}
	if strings.HasPrefix(addr, "/") || strings.HasPrefix(addr, ".") {
		return addr
	}
	return ""
}

// isSocket reports whether a Unix socket is at path.
func isSocket(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode()&os.ModeSocket != 0
}

// socketClient calls the admin API on the Unix socket at path, once its
// owner is one the CLI trusts (adminsock.go); each connection is checked
// again for the process behind it.
func socketClient(path string) (*adminClient, error) {
	owners, err := socketOwners()
	if err != nil {
		return nil, err
	}
	if err := checkSocketOwner(path, owners); err != nil {
		return nil, err
	}
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return dialTrusted(ctx, path, owners)
	}}
	return &adminClient{base: "http://admin.sock", http: &http.Client{Transport: tr}, sockPath: path}, nil
}

// adminFlags adds --admin, --token and --config to fs (--config only
// when fs has none yet: a command that reads a config for its own use
// shares it) and returns the function that builds the client once fs is
// parsed.
func adminFlags(fs *flag.FlagSet) func() (*adminClient, error) {
	addr := fs.String("admin", "", "admin listener address or URL (default $WAKEGATE_ADMIN, else the admin socket of --config\n"+
		"or of ./data, else http://127.0.0.1:8081)")
	tok := fs.String("token", "", "admin token (default $WAKEGATE_TOKEN, else the first of --config's admin.tokens)")
	cfgFlag := fs.Lookup("config")
	if cfgFlag == nil {
		fs.String("config", "", "the gateway's config file: its admin socket, or its admin listener and token")
		cfgFlag = fs.Lookup("config")
	}
	return func() (*adminClient, error) {
		a := *addr
		if a == "" {
			a = os.Getenv("WAKEGATE_ADMIN")
		}
		t := *tok
		if t == "" {
			t = os.Getenv("WAKEGATE_TOKEN")
		}
		if a == "" && cfgFlag.Value.String() != "" {
			return configClient(cfgFlag.Value.String(), t)
		}
		if a == "" {
			if p := defaultAdminSocket(); isSocket(p) {
				a = "unix:" + p
			}
		}
		return addrClient(a, t)
	}
}

// addrClient builds the client for the admin address a (a URL, host:port
// or a socket path; "" for the default listener) and token t.
func addrClient(a, t string) (*adminClient, error) {
	if p := socketPath(a); p != "" {
		return socketClient(p)
	}
	if a == "" {
		a = "http://127.0.0.1:8081"
	}
	if !strings.Contains(a, "://") {
		a = "http://" + a
	}
	u, err := url.Parse(a)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("--admin: want host:port or a URL, got %q", a)
	}
	if t == "" {
		return nil, errors.New("no admin token: pass --token or set WAKEGATE_TOKEN, or use the admin socket " +
			"(--admin unix:PATH; no token needed there)\n  hint: " + adminOnHint)
	}
	return &adminClient{base: strings.TrimSuffix(u.String(), "/"), token: t, http: &http.Client{}}, nil
}

// configClient builds the client for the gateway that runs the config
// file at path: its admin socket when one listens there, else its admin
// listener with token t or the config's own first token.
func configClient(path, t string) (*adminClient, error) {
	cfg, err := all.LoadFile(path)
	if err != nil {
		// The file may not load here for reasons of the gateway's own
		// (its secrets are in its environment, not this one's): its
		// admin socket, where that is plain in the file, still serves.
		if sock := plainSocket(path); sock != "" && isSocket(sock) {
			return socketClient(sock)
		}
		return nil, fmt.Errorf("--config: %w", err)
	}
	ad := cfg.Admin
	if ad.Socket != "" && isSocket(ad.Socket) {
		return socketClient(ad.Socket)
	}
	noSocket := "admin.socket is off"
	if ad.Socket != "" {
		noSocket = "no gateway listens on its admin socket " + ad.Socket
		if !filepath.IsAbs(ad.Socket) {
			noSocket += " (a path relative to the folder the gateway runs in; run this command there)"
		}
	}
	if t == "" {
		if toks := ad.ResolvedTokens(); len(toks) > 0 {
			t = toks[0]
		}
	}
	var unusable error
	switch {
	case ad.Listen == "":
		unusable = fmt.Errorf("--config %s: %s, and admin.listen is off\n  hint: start the gateway with this config "+
			"(wakegate serve --config %s), or pass --admin", path, noSocket, path)
	case t == "":
		unusable = fmt.Errorf("--config %s: %s, and admin.tokens holds no token for its admin listener %s\n"+
			"  hint: start the gateway with this config, or pass --admin and --token", path, noSocket, ad.Listen)
	}
	switch {
	case unusable == nil:
		return addrClient(ad.Listen, t)
	case ad.Socket != "":
		// The socket the gateway of this file would serve is not there:
		// most likely that gateway does not run.
		return nil, &noGatewayError{err: unusable, where: "unix:" + ad.Socket}
	}
	return nil, unusable
}

// parseInterleaved parses flags that may follow positional arguments and
// returns the positionals.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// adminAPIError is an error answer of the admin API: its status and the
// error body's fields (admin.ErrorDetail), and the body itself.
type adminAPIError struct {
	Status int
	admin.ErrorDetail
	Body []byte
}

// Error is one line for the operator: status, code, message and field,
// then the cause and the hint when the gateway gave them.
func (e *adminAPIError) Error() string {
	s := fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
	if e.Field != "" {
		s += " (field " + e.Field + ")"
	}
	if e.Cause != "" {
		s += "\n  cause: " + e.Cause
	}
	if e.Hint != "" {
		s += "\n  hint: " + e.Hint
	}
	if e.RequestID != "" {
		s += "\n  request: " + e.RequestID
	}
	return s
}

// do sends a request and returns the body of a 2xx answer; any other
// answer is an *adminAPIError.
func (c *adminClient) do(ctx context.Context, method, path string) ([]byte, error) {
	body, _, err := c.send(ctx, method, path, nil, "")
	return body, err
}

// send sends a request with a JSON body (nil for none) and an If-Match
// ("" for none), and returns the body and ETag of a 2xx answer; any other
// answer is an *adminAPIError.
func (c *adminClient) send(ctx context.Context, method, path string, reqBody []byte, ifMatch string) (body []byte, etag string, err error) {
	var rd io.Reader
	if reqBody != nil {
		rd = bytes.NewReader(reqBody)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, "", fmt.Errorf("admin request: %w", err)
	}
	c.authorize(req)
	req.Header.Set("Accept", "application/json")
	if reqBody != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if ifMatch != "" {
		req.Header.Set("If-Match", ifMatch)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return nil, "", adminUnreachable(c.where(), err)
	}
	defer res.Body.Close()
	body, err = io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return nil, "", fmt.Errorf("admin request: read answer: %w", err)
	}
	if res.StatusCode/100 != 2 {
		var eb admin.ErrorBody
		_ = json.Unmarshal(body, &eb)
		return nil, "", &adminAPIError{Status: res.StatusCode, ErrorDetail: eb.Error, Body: body}
	}
	return body, res.Header.Get("ETag"), nil
}

// statusNoAnswer is the exit status of `wakegate status` when it could not
// get the gateway's status (no admin listener, a refused token, a bad
// answer): it cannot say healthy or not, so it says neither 0 nor 1.
const statusNoAnswer = 3

func statusCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the JSON of /admin/status?full=true")
	client := adminFlags(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return 2
	}
	if len(pos) > 0 {
		fmt.Fprintf(stderr, "status: unexpected argument %q\n", pos[0])
		return 2
	}
	c, err := client()
	var ng *noGatewayError
	if errors.As(err, &ng) {
		fmt.Fprintln(stderr, "status:", err)
		if *asJSON {
			printNoAnswerJSON(stdout, ng.where, err)
		}
		return statusNoAnswer
	}
	if err != nil {
		fmt.Fprintln(stderr, "status:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body, err := c.do(ctx, http.MethodGet, "/admin/status?full=true")
	var s admin.Status
	if err == nil {
		if uerr := json.Unmarshal(body, &s); uerr != nil {
			err = fmt.Errorf("bad answer: %w", uerr)
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "status:", err)
		if *asJSON {
			printNoAnswerJSON(stdout, c.where(), err)
		}
		return statusNoAnswer
	}
	if *asJSON {
		_, _ = stdout.Write(body)
	} else {
		printStatus(stdout, s)
	}
	if !s.Healthy {
		return 1
	}
	return 0
}

// noAnswer is what `status --json` prints when it got no status: a
// document a script can read like the status itself (healthy is false),
// which says that no answer came and why.
type noAnswer struct {
	Healthy  bool   `json:"healthy"`
	Answered bool   `json:"answered"`
	Admin    string `json:"admin"`
	Error    string `json:"error"`
	Hint     string `json:"hint,omitempty"`
}

// printNoAnswerJSON prints the noAnswer document of err, from the admin
// API at where: the error's lines but its hint in error, the hint apart.
func printNoAnswerJSON(w io.Writer, where string, err error) {
	doc := noAnswer{Admin: where}
	var lines []string
	for _, l := range strings.Split(err.Error(), "\n") {
		l = strings.TrimSpace(l)
		if h, ok := strings.CutPrefix(l, "hint: "); ok {
			doc.Hint = h
		} else if l != "" {
			lines = append(lines, l)
		}
	}
	doc.Error = strings.Join(lines, "; ")
	b, _ := json.MarshalIndent(doc, "", "  ")
	_, _ = w.Write(append(b, '\n'))
}

func printStatus(w io.Writer, s admin.Status) {
	health := "healthy"
	if !s.Healthy {
		health = "UNHEALTHY"
	}
	fmt.Fprintf(w, "wakegate %s · instance %s · up %s · %s\n\n", cell(s.Version), cell(s.Instance),
		(time.Duration(s.UptimeS) * time.Second).String(), health)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOME\tTARGET\tSTATUS\tVERDICT\tSESSIONS\tVERSION\tLAST WAKE\tCAUSE\tPROVIDER\tPROBE\tTOTAL\tOUTCOME")
	for _, h := range s.Homes {
		status := h.Status
		if h.Wake != nil {
			status = "waking/" + h.Wake.Phase
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", cell(h.ID), cell("/node/"+h.Target), cell(status), cell(h.Verdict), h.Sessions, cell(h.Version), lastWakeCells(h))
	}
	_ = tw.Flush()
	failedHomes := printHomeProblems(w, s.Homes)
	if len(s.Apps) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(tw, "APP\tKIND\tRUNS ON\tPHASE\tREASON\tROUTE")
		for _, a := range s.Apps {
			on := a.Upstream
			if a.Home != "" {
				on = "home " + a.Home
			}
			route := a.Route
			if route == "" {
				route = "none"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", cell("/apps/"+a.Slug+"/"), cell(a.Kind), cell(on), cell(a.Phase), cell(a.Reason), cell(route))
		}
		_ = tw.Flush()
		printAppProblems(w, s.Apps, failedHomes)
	}
	printFleet(w, s.Fleet)
	for _, p := range s.Problems {
		if !aboutListed(p, s) {
			fmt.Fprintln(w, "problem:", cell(p))
		}
	}
	for _, m := range s.Warnings {
		fmt.Fprintln(w, "warning:", cell(m))
	}
	if s.Containment != "" {
		fmt.Fprintln(w, "exec containment:", cell(s.Containment))
	}
}

// aboutListed reports whether problem p (admin.Status.Problems) says what
// printHomeProblems or printAppProblems printed already, with its hint,
// under the tables: a failed home, a home whose last wake failed, a failed
// app or one held back by a mistake.
func aboutListed(p string, s admin.Status) bool {
	for _, h := range s.Homes {
		if h.Status == "failed" && h.Reason != "" && strings.HasPrefix(p, "home "+h.ID+" is failed: ") {
			return true
		}
		if w := h.LastWake; w != nil && w.Outcome == "failed" && h.Status != "failed" &&
			strings.HasPrefix(p, "home "+h.ID+": its last wake failed") {
			return true
		}
	}
	for _, a := range s.Apps {
		if (a.Phase == "failed" || a.Hint != "") && strings.HasPrefix(p, "app "+a.Slug+" is ") {
			return true
		}
	}
	return false
}

// printFleet prints the live gateways of a fleet (none on a gateway of
// its own).
func printFleet(w io.Writer, fleet []admin.FleetInstance) {
	if len(fleet) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTANCE\tVERSION\tRUN\tHEARTBEAT\tSESSIONS")
	for _, f := range fleet {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s ago\t%d\n", cell(f.Instance), cell(orDash(f.Version)), cell(orDash(f.Run)),
			time.Duration(f.HeartbeatAgeS*float64(time.Second)).Round(time.Millisecond), f.Sessions)
	}
	_ = tw.Flush()
}

// lastWakeCells are the status table's last-wake columns of h: when, and
// for a wake that finished on this instance its cause and phase timings.
func lastWakeCells(h admin.HomeView) string {
	if r := h.LastWake; r != nil {
		return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", when(r.At), cell(r.Cause), dur(r.ProviderMS), dur(r.ProbeMS), dur(r.TotalMS), cell(r.Outcome))
	}
	if h.LastWakeAt != nil {
		return fmt.Sprintf("%s\t-\t-\t-\t%s\t-", when(*h.LastWakeAt), dur(h.LastWakeLatencyMS))
	}
	return "never\t-\t-\t-\t-\t-"
}

func homeCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && isRecordVerb("home", args[0]) {
		return recordCmd("home", args, stdout, stderr)
	}
	fs := flag.NewFlagSet("home", flag.ContinueOnError)
	fs.SetOutput(stderr)
	client := adminFlags(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return 2
	}
	if len(pos) != 2 || (pos[0] != "wake" && pos[0] != "suspend" && pos[0] != "roll" && pos[0] != "refresh") {
		fmt.Fprint(stderr, "usage: wakegate home wake|suspend|roll|refresh ID\n")
		return 2
	}
	c, err := client()
	if err != nil {
		fmt.Fprintln(stderr, "home:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	body, err := c.do(ctx, http.MethodPost, "/admin/homes/"+url.PathEscape(pos[1])+"/"+pos[0])
	if err != nil {
		fmt.Fprintf(stderr, "home %s %s: %v\n", pos[0], pos[1], err)
		return 1
	}
	if pos[0] == "refresh" {
		return printRefresh(stdout, body) // cli_refresh.go
	}
	var h admin.HomeView
	if err := json.Unmarshal(body, &h); err != nil || h.ID == "" {
		_, _ = stdout.Write(body)
		return 0
	}
	fmt.Fprintf(stdout, "home %s: %s (version %s, %d sessions)\n", cell(h.ID), cell(h.Status), cell(h.Version), h.Sessions)
	return 0
}

// appGoal is the phase each app command aims at ("" for refresh without
// --wait: any phase will do).
var appGoal = map[string]string{"start": "ready", "stop": "stopped", "restart": "ready", "refresh": ""}

const appCmdUsage = "usage: wakegate app refresh SLUG [--wait ready|stopped|starting|failed]\n" +
	"       wakegate app start|stop|restart SLUG [--wait DURATION]\n"

// appCmd runs `app refresh|start|stop|restart SLUG`. refresh observes the
// app, waiting with --wait for a phase; start, stop and restart run the
// operation and wait, up to --wait (a duration; default the gateway's),
// until the app is ready (stopped for stop). It prints the app as the
// admin API answers it, and exits 1 unless the app reached the phase the
// command aims at.
func appCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && isRecordVerb("app", args[0]) {
		return recordCmd("app", args, stdout, stderr)
	}
	fs := flag.NewFlagSet("app", flag.ContinueOnError)
	fs.SetOutput(stderr)
	wait := fs.String("wait", "", "refresh: wait until the app is in this phase; start, stop, restart: wait up to this duration")
	client := adminFlags(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return 2
	}
	if len(pos) != 2 {
		fmt.Fprint(stderr, appCmdUsage)
		return 2
	}
	verb, slug := pos[0], pos[1]
	goal, known := appGoal[verb]
	if !known {
		fmt.Fprint(stderr, appCmdUsage)
		return 2
	}
	if msg := appWaitProblem(verb, *wait); msg != "" {
		fmt.Fprintf(stderr, "app %s: --wait: %s\n", verb, msg)
		return 2
	}
	if verb == "refresh" {
		goal = *wait
	}
	c, err := client()
	if err != nil {
		fmt.Fprintln(stderr, "app:", err)
		return 2
	}
	path := "/admin/apps/" + url.PathEscape(slug) + "/" + verb
	if *wait != "" {
		path += "?wait=" + url.QueryEscape(*wait)
	}
	ctx, cancel := context.WithTimeout(context.Background(), admin.MaxAppWait+time.Minute)
	defer cancel()
	body, err := c.do(ctx, http.MethodPost, path)
	var ae *adminAPIError
	if errors.As(err, &ae) && ae.Status == http.StatusGatewayTimeout && ae.Code == "" {
		// The wait ran out: the answer is the app as it is now.
		fmt.Fprintf(stderr, "app %s %s: the wait ran out before the app was %s\n", verb, slug, goal)
		body, err = ae.Body, nil
		goal = "(timed out)"
	}
	if err != nil {
		fmt.Fprintf(stderr, "app %s %s: %v\n", verb, slug, err)
		return 1
	}
	return printApp(stdout, body, goal)
}

// appWaitProblem checks --wait for verb ("" when it is fine).
func appWaitProblem(verb, wait string) string {
	if wait == "" {
		return ""
	}
	if verb == "refresh" {
		switch wait {
		case "ready", "stopped", "starting", "failed":
			return ""
		}
		return fmt.Sprintf("want ready, stopped, starting or failed, got %q", wait)
	}
	if d, err := time.ParseDuration(wait); err != nil || d <= 0 || d > admin.MaxAppWait {
		return fmt.Sprintf("want a duration up to %s, such as 30s, got %q", admin.MaxAppWait, wait)
	}
	return ""
}

// printApp prints an app answer, indented, and returns the exit status:
// 1 when goal is set and the app's phase is another.
func printApp(stdout io.Writer, body []byte, goal string) int {
	var out bytes.Buffer
	if json.Indent(&out, body, "", "  ") != nil {
		out.Reset()
		out.Write(body)
	}
	_, _ = stdout.Write(bytes.TrimRight(out.Bytes(), "\n"))
	fmt.Fprintln(stdout)
	var v admin.AppView
	if goal != "" && (json.Unmarshal(body, &v) != nil || v.Phase != goal) {
		return 1
	}
	return 0
}

// noGatewayError is a --config whose gateway the CLI found nowhere: its
// admin socket is not there and its listener cannot be used. status
// reads it as no answer (statusNoAnswer).
type noGatewayError struct {
	err   error
	where string // the admin socket looked for, as unix:PATH
}

func (e *noGatewayError) Error() string { return e.err.Error() }
func (e *noGatewayError) Unwrap() error { return e.err }

// plainSocket is the admin socket the config file at path names, read
// from its text alone (data_dir and admin.socket, without variables), for
// a file that does not load in the CLI's environment; "" when the file
// does not say it plainly.
func plainSocket(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var f struct {
		DataDir *string `yaml:"data_dir"`
		Admin   struct {
			Socket *string `yaml:"socket"`
		} `yaml:"admin"`
	}
	if yaml.Unmarshal(b, &f) != nil {
		return ""
	}
	sock := filepath.Join("data", "admin.sock")
	switch {
	case f.Admin.Socket != nil:
		sock = *f.Admin.Socket
	case f.DataDir != nil && *f.DataDir != "":
		sock = filepath.Join(*f.DataDir, "admin.sock")
	}
	if strings.Contains(sock, "$") {
		return ""
	}
	return sock
}

// orDash is s, or "-" when s is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
