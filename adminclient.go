package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/wakegate/wakegate/admin"
)

// The admin commands talk to a running gateway's admin listener:
//
//	wakegate status [--json]
//	wakegate home wake|suspend|roll ID
//	wakegate app refresh SLUG [--wait ready]
//
// The address and token come from --admin and --token, or WAKEGATE_ADMIN
// and WAKEGATE_TOKEN. Exit status: 0 healthy or done, 1 unhealthy or
// failed, 2 usage error.

const adminUsage = `admin commands (address: --admin or WAKEGATE_ADMIN, default http://127.0.0.1:8081;
token: --token or WAKEGATE_TOKEN):
  status [--json]                   the gateway's status, homes and apps; exit 1 when unhealthy
  home wake|suspend|roll ID         act on a home
  app refresh SLUG [--wait ready]   refresh an app's status, optionally waiting for a phase
`

// adminClient calls the admin API.
type adminClient struct {
	base  string
	token string
	http  *http.Client
}

// adminFlags adds --admin and --token to fs and returns the function that
// builds the client once fs is parsed.
func adminFlags(fs *flag.FlagSet) func() (*adminClient, error) {
	addr := fs.String("admin", "", "admin listener address or URL (default $WAKEGATE_ADMIN or http://127.0.0.1:8081)")
	tok := fs.String("token", "", "admin token (default $WAKEGATE_TOKEN)")
	return func() (*adminClient, error) {
		a := *addr
		if a == "" {
			a = os.Getenv("WAKEGATE_ADMIN")
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
		t := *tok
		if t == "" {
			t = os.Getenv("WAKEGATE_TOKEN")
		}
		if t == "" {
			return nil, errors.New("no admin token: pass --token or set WAKEGATE_TOKEN")
		}
		return &adminClient{base: strings.TrimSuffix(u.String(), "/"), token: t, http: &http.Client{Timeout: 2 * time.Minute}}, nil
	}
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

// adminAPIError is an error answer of the admin API.
type adminAPIError struct {
	Status  int
	Code    string
	Message string
	Field   string
}

func (e *adminAPIError) Error() string {
	s := fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
	if e.Field != "" {
		s += " (field " + e.Field + ")"
	}
	return s
}

// do sends a request and returns the body of a 2xx answer.
func (c *adminClient) do(ctx context.Context, method, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, nil)
	if err != nil {
		return nil, fmt.Errorf("admin request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	res, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("admin request: %w", err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("admin request: read answer: %w", err)
	}
	if res.StatusCode/100 != 2 {
		var eb struct {
			Error struct{ Code, Message, Field string } `json:"error"`
		}
		_ = json.Unmarshal(body, &eb)
		return nil, &adminAPIError{Status: res.StatusCode, Code: eb.Error.Code, Message: eb.Error.Message, Field: eb.Error.Field}
	}
	return body, nil
}

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
	if err != nil {
		fmt.Fprintln(stderr, "status:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body, err := c.do(ctx, http.MethodGet, "/admin/status?full=true")
	if err != nil {
		fmt.Fprintln(stderr, "status:", err)
		return 1
	}
	var s admin.Status
	if err := json.Unmarshal(body, &s); err != nil {
		fmt.Fprintln(stderr, "status: bad answer:", err)
		return 1
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

func printStatus(w io.Writer, s admin.Status) {
	health := "healthy"
	if !s.Healthy {
		health = "UNHEALTHY"
	}
	fmt.Fprintf(w, "wakegate %s · instance %s · up %s · %s\n\n", s.Version, s.Instance,
		(time.Duration(s.UptimeS) * time.Second).String(), health)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOME\tTARGET\tSTATUS\tVERDICT\tSESSIONS\tVERSION\tLAST WAKE")
	for _, h := range s.Homes {
		last := "never"
		if h.LastWakeAt != nil {
			last = fmt.Sprintf("%s (%.0f ms)", h.LastWakeAt.Local().Format("2006-01-02 15:04:05"), h.LastWakeLatencyMS)
		}
		status := h.Status
		if h.Wake != nil {
			status = "waking/" + h.Wake.Phase
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", h.ID, "/node/"+h.Target, status, h.Verdict, h.Sessions, h.Version, last)
	}
	_ = tw.Flush()
	if len(s.Apps) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(tw, "APP\tKIND\tRUNS ON")
		for _, a := range s.Apps {
			on := a.Upstream
			if a.Home != "" {
				on = "home " + a.Home
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", "/apps/"+a.Slug+"/", a.Kind, on)
		}
		_ = tw.Flush()
	}
	for _, p := range s.Problems {
		fmt.Fprintln(w, "problem:", p)
	}
}

func homeCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("home", flag.ContinueOnError)
	fs.SetOutput(stderr)
	client := adminFlags(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return 2
	}
	if len(pos) != 2 || (pos[0] != "wake" && pos[0] != "suspend" && pos[0] != "roll") {
		fmt.Fprint(stderr, "usage: wakegate home wake|suspend|roll ID\n")
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
	var h admin.HomeView
	if err := json.Unmarshal(body, &h); err != nil || h.ID == "" {
		_, _ = stdout.Write(body)
		return 0
	}
	fmt.Fprintf(stdout, "home %s: %s (version %s, %d sessions)\n", h.ID, h.Status, h.Version, h.Sessions)
	return 0
}

func appCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("app", flag.ContinueOnError)
	fs.SetOutput(stderr)
	wait := fs.String("wait", "", "wait until the app reaches this phase (ready)")
	client := adminFlags(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return 2
	}
	if len(pos) != 2 || pos[0] != "refresh" {
		fmt.Fprint(stderr, "usage: wakegate app refresh SLUG [--wait ready]\n")
		return 2
	}
	if *wait != "" && *wait != "ready" {
		fmt.Fprintf(stderr, "app refresh: --wait: want ready, got %q\n", *wait)
		return 2
	}
	c, err := client()
	if err != nil {
		fmt.Fprintln(stderr, "app:", err)
		return 2
	}
	path := "/admin/apps/" + url.PathEscape(pos[1]) + "/refresh"
	if *wait != "" {
		path += "?wait=" + url.QueryEscape(*wait)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	body, err := c.do(ctx, http.MethodPost, path)
	if err != nil {
		fmt.Fprintf(stderr, "app refresh %s: %v\n", pos[1], err)
		return 1
	}
	var out bytes.Buffer
	if json.Indent(&out, body, "", "  ") != nil {
		out.Reset()
		out.Write(body)
	}
	_, _ = stdout.Write(bytes.TrimRight(out.Bytes(), "\n"))
	fmt.Fprintln(stdout)
	var phase struct {
		Phase string `json:"phase"`
	}
	if *wait != "" && json.Unmarshal(body, &phase) == nil && phase.Phase != "" && phase.Phase != *wait {
		return 1
	}
	return 0
}
