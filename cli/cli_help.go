package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/wakegate/wakegate/admin"
)

// adminOnHint says how the admin listener is turned on and found; the
// admin commands print it when they cannot reach it.
const adminOnHint = "the admin listener is on once admin.tokens holds a token of 16+ characters " +
	"(the default config reads it from WAKEGATE_TOKEN: start the gateway with WAKEGATE_TOKEN=$(openssl rand -hex 16) " +
	"and give the same token here with --token or WAKEGATE_TOKEN); it listens on admin.listen " +
	"(default 127.0.0.1:8081; --admin or WAKEGATE_ADMIN point here at another address); on the gateway's " +
	"machine the admin socket admin.socket (default data_dir/admin.sock) needs no token: run this command as root, " +
	"as the gateway's user or as a member of admin.socket_group, from the gateway's directory, with --config and the gateway's config file, or with --admin unix:PATH"

// adminUnreachable is the error of an admin request that got no answer:
// when nothing listened there, it says how to turn the listener on.
func adminUnreachable(base string, err error) error {
	var ne net.Error
	if errors.Is(err, syscall.ECONNREFUSED) || errors.As(err, &ne) {
		return fmt.Errorf("admin request: %w\n  no admin listener answered at %s\n  hint: %s", err, base, adminOnHint)
	}
	return fmt.Errorf("admin request: %w", err)
}

// commandUsage is each command's synopsis and what it does, printed by
// `wakegate COMMAND --help` above the command's flags.
var commandUsage = map[string]string{
	"serve": "usage: wakegate serve [--config FILE] [--listen ADDR] [--user USER[:GROUP]] [--reset-store]\n\n" +
		"runs the gateway on FILE (default: the embedded config.yaml, the demo home on 127.0.0.1:8080);\n" +
		"--reset-store moves a store that is refused (empty, damaged) aside and starts with an empty one;\n" +
		"started as root with --user (or $WAKEGATE_USER), it gives data_dir to that user and becomes it",
	"check-config": "usage: wakegate check-config [--config FILE]\n\n" +
		"validates a config file; exit 1 with every error (file:line: field: what is wrong)",
	"version": "usage: wakegate version\n\nprints the version",
	"demo-home": "usage: wakegate demo-home [--addr A] [--target T] [--version V] [--boot-delay D] [--listen-fd N | --unix PATH] [--relay-token T] [--notify-ready URL]\n\n" +
		"runs the built-in demo home (HTTP and WebSocket at /node/{target}/ and /apps/demo/)",
	"status": "usage: wakegate status [--json] [--admin ADDR] [--token T]\n\n" +
		"prints a running gateway's homes and apps from its admin API, and under them what failed\n" +
		"(a failed home, a home whose last wake failed, a failed app or one held back by a mistake)\n" +
		"with the cause and the likely fix\n\n" +
		"exit status: 0 healthy; 1 something failed or the gateway is degraded or draining;\n" +
		"2 usage error; 3 no status to judge (no admin listener answered, token refused, bad answer);\n" +
		"with --json, exit 3 still prints a JSON document: healthy and answered false, the error and a hint",
	"home": "usage: wakegate home wake|suspend|roll|refresh ID\n" +
		"       wakegate home get|put|delete ID [--json] [--force | --if-match N] [--file F] [key=value | key:=JSON ...]\n\n" +
		"acts on a home, or reads, registers or removes it, through the admin API",
	"app": "usage: wakegate app refresh SLUG [--wait ready|stopped|starting|failed]\n" +
		"       wakegate app start|stop|restart SLUG [--wait DURATION]\n" +
		"       wakegate app get|put|delete SLUG [--json] [--force | --if-match N] [--file F] [key=value | key:=JSON ...]\n\n" +
		"observes, operates, reads, registers or removes an app through the admin API",
	"target": "usage: wakegate target get | target set VERSION [--json] [--force | --if-match N] [key=value ...]\n\n" +
		"reads or registers the roll target through the admin API",
	"logs": "usage: wakegate logs HOME [--follow] [--lines N]\n\n" +
		"prints (and follows) an exec home's log through the admin API",
	"store": "usage: wakegate store check [--config FILE | --file PATH]\n" +
		"       wakegate store backup [--config FILE] FILE\n" +
		"       wakegate store drop [--config FILE | --file PATH] BUCKET/KEY...\n\n" +
		"checks the embedded store, writes a consistent copy of it, or drops records that cannot be read (gateway stopped)",
	"reload": "usage: wakegate reload [--allow-remove-all] [--json] [--admin ADDR] [--token T]\n\n" +
		"applies the running gateway's config file again through the admin API (SIGHUP does the same):\n" +
		"homes and apps added, changed or removed, settings that change without a restart;\n" +
		"exit 1 when the gateway refuses the file, with its errors; a file that is empty, or that\n" +
		"declares no home and no app, is applied only with --allow-remove-all (never by SIGHUP)",
	"healthcheck": "usage: wakegate healthcheck [--addr ADDR] [--path /healthz|/readyz] [--timeout D]\n\n" +
		"asks this machine's gateway for GET /healthz (or --path) and exits 0 on 200, 1 otherwise:\n" +
		"the container health check of an image with no shell and no curl",
	"tls": "usage: wakegate tls root [--config FILE]\n\n" +
		"prints the internal CA's root certificate (tls.mode internal)",
	"help": strings.TrimSuffix(usage, "\n"),
}

// helpRequested reports whether args (a command's arguments) ask for help.
func helpRequested(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// commandHelp prints the usage of the command args name, followed by its
// flags, to stdout; ok is false for an unknown command.
func commandHelp(args []string, stdout io.Writer) (code int, ok bool) {
	text, ok := commandUsage[args[0]]
	if !ok {
		return 0, false
	}
	fmt.Fprintln(stdout, text)
	if flags := commandFlags(args); flags != "" {
		fmt.Fprintf(stdout, "\nflags:\n%s", flags)
	}
	return 0, true
}

// commandFlags runs the command with its leading words and -h alone, which
// makes its flag set print its flags and return before doing anything,
// and returns that listing ("" when the command has no flags).
func commandFlags(args []string) string {
	call := []string{args[0]}
	for _, a := range args[1:] {
		if strings.HasPrefix(a, "-") {
			break
		}
		call = append(call, a)
	}
	switch args[0] {
	case "version", "help":
		return ""
	case "demo-home":
		call = call[:1]
	case "home", "app", "target", "store", "tls":
		if len(call) == 1 { // the first verb picks the flag set
			call = append(call, map[string]string{"home": "get", "app": "get", "target": "get", "store": "check", "tls": "root"}[args[0]])
		}
		call = call[:2]
	default:
		call = call[:1]
	}
	var out, errb bytes.Buffer
	_ = dispatch(append(call, "-h"), &out, &errb)
	listing := errb.String()
	if i := strings.Index(listing, "\n"); strings.HasPrefix(listing, "Usage of ") && i >= 0 {
		listing = listing[i+1:]
	}
	if j := strings.Index(listing, "flags:\n"); j >= 0 { // demo-home's own listing
		listing = listing[j+len("flags:\n"):]
	}
	return listing
}

// printAppProblems prints, under the apps table, the cause and the likely
// fix of each app that failed or is held back by a mistake (a hint).
func printAppProblems(w io.Writer, apps []admin.AppView, failedHomes map[string]bool) {
	for _, a := range apps {
		msg := safeText(a.Message, true)
		if a.Reason == "runtime-failed" && failedHomes[a.Home] {
			msg = "its home " + cell(a.Home) + " failed (above)" // the home's reason, said once
		}
		if a.Phase == "failed" || a.Hint != "" {
			fmt.Fprintf(w, "app /apps/%s/ is %s (%s): %s\n", cell(a.Slug), cell(a.Phase), cell(a.Reason), msg)
		}
		if a.Hint != "" {
			fmt.Fprintf(w, "  hint: %s\n", safeText(a.Hint, true))
		}
	}
}

// printHomeProblems prints, under the status table, why each failed home
// failed (its exit status and last log lines) and the error and likely fix
// of each home whose last wake failed. It returns the ids of the failed
// homes whose reason it printed.
func printHomeProblems(w io.Writer, homes []admin.HomeView) map[string]bool {
	failed := map[string]bool{}
	for _, h := range homes {
		if h.Status == "failed" && h.Reason != "" {
			fmt.Fprintf(w, "home %s failed: %s\n", cell(h.ID), safeText(h.Reason, true))
			failed[h.ID] = true
		}
		if r := h.LastWake; r != nil && r.Outcome == "failed" && h.Status != "failed" {
			fmt.Fprintf(w, "home %s: last wake failed: %s\n", cell(h.ID), safeText(r.Error, true))
		}
		if r := h.LastWake; r != nil && r.Outcome == "failed" && r.Hint != "" {
			fmt.Fprintf(w, "  hint: %s\n", safeText(r.Hint, true))
		}
	}
	return failed
}
