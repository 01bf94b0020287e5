package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/config"
	"github.com/wakegate/wakegate/fault"
	"github.com/wakegate/wakegate/gateway"
	"github.com/wakegate/wakegate/provider/all"
)

// reloadUsage is the reload command's line in the usage.
const reloadUsage = `  reload [--allow-remove-all]       apply the running gateway's config file again (as SIGHUP
                                    does): homes, apps, access and wake timeouts change in
                                    place; a bad file changes nothing and says why, and an
                                    empty one, or one without homes and apps, is applied only
                                    with --allow-remove-all; --config names the gateway to ask,
                                    which reads the file it was started with
`

// reloadCmd runs `wakegate reload`: POST /admin/reload, then what changed.
func reloadCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("reload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the JSON answer")
	removeAll := fs.Bool("allow-remove-all", false, "apply a file that is empty, or that declares no home and no app,\n"+
		"although the running config declares some (every one of them is removed)")
	client := adminFlags(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if len(pos) > 0 {
		fmt.Fprintf(stderr, "reload: unexpected argument %q\n", pos[0])
		return 2
	}
	c, err := client()
	if err != nil {
		fmt.Fprintln(stderr, "reload:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	path := "/admin/reload"
	if *removeAll {
		path += "?allow_remove_all=true"
	}
	body, err := c.do(ctx, http.MethodPost, path)
	if err != nil {
		fmt.Fprintln(stderr, "reload:", err)
		return 1
	}
	if *asJSON {
		_, _ = stdout.Write(body)
		return 0
	}
	var res admin.Reload
	if err := json.Unmarshal(body, &res); err != nil {
		fmt.Fprintln(stderr, "reload: bad answer:", err)
		return 1
	}
	printReload(stdout, res)
	return 0
}

// printReload writes what a reload did, one line per kind of change.
func printReload(w io.Writer, res admin.Reload) {
	fmt.Fprintf(w, "reloaded %s\n", res.File)
	changed := false
	for _, l := range []struct {
		what string
		v    []string
	}{{"homes added", res.HomesAdded}, {"homes changed", res.HomesChanged}, {"homes removed", res.HomesRemoved},
		{"homes kept (reload again later)", res.HomesKept}, {"apps added", res.AppsAdded},
		{"apps changed", res.AppsChanged}, {"apps removed", res.AppsRemoved}, {"settings applied", res.Applied},
		{"NOT applied until a restart", res.NeedRestart}} {
		if len(l.v) > 0 {
			fmt.Fprintf(w, "  %s: %s\n", l.what, strings.Join(l.v, ", "))
			changed = true
		}
	}
	if !changed {
		fmt.Fprintln(w, "  nothing changed")
	}
}

// reloadSource is how serve's gateway reads its config file again: path
// with serve's overrides (listen). Nil for the embedded config.
func reloadSource(path, listen string) func() (*config.Config, error) {
	if path == "" {
		return nil
	}
	return func() (*config.Config, error) {
		cfg, err := all.LoadFile(path)
		if err != nil {
			return nil, err
		}
		if listen != "" {
			cfg.Listen = listen
		}
		return cfg, nil
	}
}

// reloadOnHangup reloads g's config at every SIGHUP until ctx ends; the
// returned stop ends the watch and waits for a reload in progress.
func reloadOnHangup(ctx context.Context, g *gateway.Gateway, log *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if _, err := g.Reload(ctx, admin.ReloadOptions{}); err != nil {
					logRefusedReload(log, err)
				}
			}
		}
	})
	return func() {
		signal.Stop(hup)
		cancel()
		wg.Wait()
	}
}

// logRefusedReload logs why a SIGHUP's reload was refused, with the code
// and the way out when the error has them: a signal carries no
// confirmation, so the hint says which command applies the file.
func logRefusedReload(log *slog.Logger, err error) {
	attrs := []any{"err", err}
	if fe, ok := fault.As(err); ok {
		attrs = append(attrs, "code", fe.Code)
		if fe.Hint != "" {
			attrs = append(attrs, "hint", fe.Hint)
		}
	}
	log.Error("config reload refused", attrs...)
}
