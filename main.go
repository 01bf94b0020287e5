// Command wakegate is an edge gateway for sleeping, per-user backends.
// Its command line lives in package cli; `wakegate help` lists the
// commands.
package main

import (
	_ "embed"
	"os"
	"runtime/debug"

	"github.com/wakegate/wakegate/cli"
)

// defaultConfig is the config `wakegate serve` runs with when no --config
// is given.
//
//go:embed config.yaml
var defaultConfig []byte

// version is set at build time with -ldflags "-X main.version=..." (the
// release build and the Dockerfile do).
var version = "dev"

func main() {
	os.Exit(cli.Run(cli.Build{Version: buildVersion(), DefaultConfig: defaultConfig}, os.Args[1:], os.Stdout, os.Stderr))
}

// buildVersion is version, or, for a binary built without it by `go
// install github.com/wakegate/wakegate@v1.2.3`, the module version the go
// command recorded.
func buildVersion() string {
	if version != "dev" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return version
}
