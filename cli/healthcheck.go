package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// healthcheck asks this machine's gateway for GET /healthz (or --path) and
// exits 0 on 200, 1 otherwise: the container HEALTHCHECK of an image with
// no shell and no curl. The port comes from --addr, else $WAKEGATE_LISTEN
// (as the config reads it), else 127.0.0.1:8080.
func healthcheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "", "the gateway's listen address (default $WAKEGATE_LISTEN or 127.0.0.1:8080)")
	path := fs.String("path", "/healthz", "the path to ask: /healthz (alive) or /readyz (taking traffic)")
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for the answer")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	a := *addr
	if a == "" {
		a = os.Getenv("WAKEGATE_LISTEN")
	}
	if a == "" {
		a = "127.0.0.1:8080"
	}
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		fmt.Fprintf(stderr, "healthcheck: --addr: want host:port, got %q\n", a)
		return 2
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	u := "http://" + net.JoinHostPort(host, port) + "/" + strings.TrimPrefix(*path, "/")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		fmt.Fprintf(stderr, "healthcheck: %v\n", err)
		return 2
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "healthcheck: %s: %v\n", u, err)
		return 1
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 4096))
	if res.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "healthcheck: %s: status %d\n", u, res.StatusCode)
		return 1
	}
	fmt.Fprintf(stdout, "healthcheck: %s: ok\n", u)
	return 0
}
