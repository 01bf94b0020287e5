// Package cli is wakegate's command line: every subcommand (serve,
// check-config, the admin client commands, store, tls, demo-home), their
// help and how they print. The binary's main package only hands it the
// arguments, the version and the embedded default config.
//
//	wakegate serve [--config FILE] [--listen ADDR] [--user USER[:GROUP]] [--reset-store]
//	wakegate store check [--config FILE | --file PATH]
//	wakegate store backup [--config FILE] [--admin URL --token T] FILE
//	wakegate store drop [--config FILE | --file PATH] BUCKET/KEY...
//	wakegate check-config [--config FILE]
//	wakegate version
//	wakegate healthcheck [--addr ADDR] [--path /healthz]
//	wakegate demo-home [--addr ADDR | --unix PATH] [--target NAME] [--version V] [--boot-delay D]
//	wakegate status [--json]
//	wakegate home wake|suspend|roll|refresh ID
//	wakegate home get|put|delete ID, app get|put|delete SLUG, target get|set
//	wakegate logs HOME [--follow] [--lines N]
//	wakegate app refresh SLUG [--wait PHASE]
//	wakegate app start|stop|restart SLUG [--wait DURATION]
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/wakegate/wakegate/config"
	"github.com/wakegate/wakegate/demohome"
	"github.com/wakegate/wakegate/gateway"
	"github.com/wakegate/wakegate/provider/all"
)

// Build is what the binary carries besides its code.
type Build struct {
	// Version is what `wakegate version` prints and the gateway reports.
	Version string
	// DefaultConfig is the config `serve`, `check-config`, `store` and
	// `tls` use when no --config is given (the embedded config.yaml).
	DefaultConfig []byte
}

// build is the running binary's Build, set once by Run before any command
// runs (tests set it in TestMain).
var build = Build{Version: "dev"}

// Run runs the command line args (without the program's name) and returns
// the process's exit code: 0 done, 1 failed, 2 usage, 3 no gateway answered.
func Run(b Build, args []string, stdout, stderr io.Writer) int {
	build = b
	return run(args, stdout, stderr)
}

const usage = `usage: wakegate <command> [flags]

commands:
  serve         run the gateway (default config: the embedded config.yaml)
  check-config  validate a config file and print every error
  version       print the version
  demo-home     run the built-in demo home
  healthcheck   exit 0 if this machine's gateway answers /healthz (container health checks)
  status        show a running gateway's status (admin API)
  reload        apply the running gateway's config file again (admin API; SIGHUP does the same)
  home          get, put, delete, wake, suspend, roll or refresh a home (admin API)
  app           get, put, delete, refresh, start, stop or restart an app (admin API)
  target        get or set the roll target (admin API)
  logs          print (and follow) an exec home's log (admin API)
  store         check the embedded store, back it up, drop unreadable records (store check, store backup FILE, store drop B/K)
  tls root      print the internal CA's root certificate (tls.mode internal)

` + adminUsage + reloadUsage + recordUsage

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	if helpRequested(args[1:]) {
		if code, ok := commandHelp(args, stdout); ok {
			return code
		}
	}
	return dispatch(args, stdout, stderr)
}

// dispatch runs the command args[0] names (args is not empty).
func dispatch(args []string, stdout, stderr io.Writer) int {
	switch args[0] {
	case "serve":
		return serve(args[1:], stderr)
	case "check-config":
		return checkConfig(args[1:], stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "wakegate", build.Version)
		return 0
	case "demo-home":
		return demoHome(args[1:], stderr)
	case "healthcheck":
		return healthcheck(args[1:], stdout, stderr)
	case "status", "reload", "home", "app", "target", "logs":
		return adminCmd(args, stdout, stderr)
	case "store":
		return storeCmd(args[1:], stdout, stderr)
	case "tls":
		return tlsCmd(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "wakegate: unknown command %q\n%s", args[0], usage)
	return 2
}

// adminCmds are the commands that print what the admin API answers.
var adminCmds = map[string]func(args []string, stdout, stderr io.Writer) int{
	"status": statusCmd, "reload": reloadCmd, "home": homeCmd, "app": appCmd, "target": targetCmd, "logs": logsCmd,
}

// adminCmd runs the admin command args[0] with its output passed through
// termWriter (cli_safe.go): what it prints can come from homes.
func adminCmd(args []string, stdout, stderr io.Writer) int {
	out, errs := &termWriter{w: stdout}, &termWriter{w: stderr}
	defer func() { _, _ = out.Flush(), errs.Flush() }()
	return adminCmds[args[0]](args[1:], out, errs)
}

func loadConfig(path string) (*config.Config, error) {
	if path == "" {
		return all.Load("config.yaml (embedded)", build.DefaultConfig)
	}
	return all.LoadFile(path)
}

func printConfigError(w io.Writer, err error) {
	var ce config.ConfigErrors
	if errors.As(err, &ce) {
		for _, e := range ce {
			fmt.Fprintln(w, e)
		}
		return
	}
	fmt.Fprintln(w, err)
}

// parseAndLoad parses a subcommand's flags and loads the config file its
// -config names (path). On failure cfg is nil and code is the exit code: 2
// for bad flags, 1 for a config that does not load (its error printed).
func parseAndLoad(fs *flag.FlagSet, args []string, path *string, stderr io.Writer) (cfg *config.Config, code int) {
	if err := fs.Parse(args); err != nil {
		return nil, 2
	}
	cfg, err := loadConfig(*path)
	if err != nil {
		printConfigError(stderr, err)
		return nil, 1
	}
	return cfg, 0
}

func checkConfig(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check-config", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "config file (default: the embedded config.yaml)")
	cfg, code := parseAndLoad(fs, args, path, stderr)
	if cfg == nil {
		return code
	}
	for _, w := range cfg.Warnings() {
		fmt.Fprintln(stderr, "warning:", w)
	}
	for _, n := range cfg.HostNotes() { // docs/headers.md
		fmt.Fprintln(stdout, "note:", n)
	}
	fmt.Fprintln(stdout, "config ok")
	return 0
}

func serve(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "config file (default: the embedded config.yaml)")
	listen := fs.String("listen", "", "public listen address, overriding the config's listen")
	runAsSpec := fs.String("user", os.Getenv(runAsEnv), "when started as root, the user (USER[:GROUP]) to become once data_dir is theirs\n"+
		"(default $"+runAsEnv+")")
	reset := fs.Bool("reset-store", false, "start with a new, empty store where data_dir's store is refused: an empty,\n"+
		"damaged or unreadable file is moved aside first (named in the log), a missing one\n"+
		"is allowed although homes ran there (every stored home and the roll target are forgotten)")
	cfg, code := parseAndLoad(fs, args, path, stderr)
	if cfg == nil {
		return code
	}
	if *listen != "" {
		cfg.Listen = *listen
	}
	cfg.ResetStore = *reset
	log := gateway.NewLogger(cfg.Log, stderr)
	if *runAsSpec != "" {
		ra, err := parseRunAs(*runAsSpec)
		if err == nil {
			err = ra.become(cfg.DataDir, log)
		}
		if err != nil {
			log.Error("start", "err", err)
			return 1
		}
	}
	defer startGCRoom(cfg, log)() // gcroom.go
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	g, err := gateway.New(ctx, cfg, log)
	if err != nil {
		attrs := []any{"err", err}
		var h interface{ Hint() string }
		if errors.As(err, &h) {
			attrs = append(attrs, "hint", h.Hint())
		}
		log.Error("start", attrs...)
		return 1
	}
	defer g.Close()
	defer startCPUProfile(stderr)() // cpuprofile.go
	g.SetVersion(build.Version)
	g.SetReloadSource(reloadSource(*path, *listen))
	defer reloadOnHangup(ctx, g, log)()
	if err := g.Run(ctx); err != nil {
		attrs := []any{"err", err}
		var h interface{ Hint() string }
		if errors.As(err, &h) && h.Hint() != "" {
			attrs = append(attrs, "hint", h.Hint())
		}
		log.Error("serve", attrs...)
		return 1
	}
	return 0
}

func demoHome(args []string, stderr io.Writer) int {
	o, err := demohome.ParseFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(stderr, err)
		return 0
	}
	// The demo home's errors start with "demo-home:" already.
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := demohome.Run(ctx, o, stderr); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}
