package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/wakegate/wakegate/admin"
)

// logsCmd runs `wakegate logs HOME [--follow] [--lines N]`: the last lines
// of an exec home's log (relay token masked by the gateway) and, with
// --follow, each new line as the home writes it, until interrupted.
func logsCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("logs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	follow := fs.Bool("follow", false, "keep printing new lines as the home writes them")
	fs.BoolVar(follow, "f", false, "short for --follow")
	lines := fs.Int("lines", admin.DefaultLogLines, "how many last lines to print first (at most "+strconv.Itoa(admin.MaxLogLines)+")")
	client := adminFlags(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return 2
	}
	if len(pos) != 1 {
		fmt.Fprint(stderr, "usage: wakegate logs HOME [--follow] [--lines N]\n")
		return 2
	}
	if *lines < 0 || *lines > admin.MaxLogLines {
		fmt.Fprintf(stderr, "logs: --lines: want 0 to %d, got %d\n", admin.MaxLogLines, *lines)
		return 2
	}
	c, err := client()
	if err != nil {
		fmt.Fprintln(stderr, "logs:", err)
		return 2
	}
	path := "/admin/homes/" + url.PathEscape(pos[0]) + "/logs?lines=" + strconv.Itoa(*lines)
	if !*follow {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		body, err := c.do(ctx, http.MethodGet, path)
		if err != nil {
			fmt.Fprintf(stderr, "logs %s: %v\n", pos[0], err)
			return 1
		}
		var v admin.LogView
		if err := json.Unmarshal(body, &v); err != nil {
			fmt.Fprintln(stderr, "logs: bad answer:", err)
			return 1
		}
		for _, l := range v.Lines {
			fmt.Fprintln(stdout, safeText(l, true))
		}
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := c.followLog(ctx, path+"&follow=1", stdout); err != nil && ctx.Err() == nil {
		fmt.Fprintf(stderr, "logs %s: %v\n", pos[0], err)
		return 1
	}
	return 0
}

// followLog prints each line event of the log stream at path until ctx
// ends or the gateway ends the stream.
func (c *adminClient) followLog(ctx context.Context, path string, w io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return fmt.Errorf("admin request: %w", err)
	}
	c.authorize(req)
	req.Header.Set("Accept", "text/event-stream")
	res, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("admin request: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		var eb admin.ErrorBody
		_ = json.Unmarshal(body, &eb)
		return &adminAPIError{Status: res.StatusCode, ErrorDetail: eb.Error, Body: body}
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && event == "line":
			var l string
			if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &l) == nil {
				fmt.Fprintln(w, safeText(l, true))
			}
		case line == "":
			event = ""
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read log stream: %w", err)
	}
	return nil
}
