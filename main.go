// Command wakegate is an edge gateway for sleeping, per-user backends.
// Its command line lives in package cli; `wakegate help` lists the
// commands.
package main

import (
	_ "embed"
	"os"

	"github.com/wakegate/wakegate/cli"
)

// defaultConfig is the config `wakegate serve` runs with when no --config
// is given.
//
//go:embed config.yaml
var defaultConfig []byte

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(cli.Run(cli.Build{Version: version, DefaultConfig: defaultConfig}, os.Args[1:], os.Stdout, os.Stderr))
}
