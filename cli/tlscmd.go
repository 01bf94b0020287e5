package cli

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/wakegate/wakegate/tlsfront"
)

// tlsCmd runs `wakegate tls root`: it prints the internal CA's root
// certificate (tls.mode internal), creating the CA in data_dir when it
// does not exist yet, so that clients can trust it before the first start.
func tlsCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "root" {
		fmt.Fprintln(stderr, "usage: wakegate tls root [--config FILE]\n\nprints the internal CA's root certificate (PEM) for clients to trust")
		return 2
	}
	fs := flag.NewFlagSet("tls root", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "config file (default: the embedded config.yaml)")
	cfg, code := parseAndLoad(fs, args[1:], path, stderr)
	if cfg == nil {
		return code
	}
	if cfg.TLS.Mode != string(tlsfront.Internal) {
		fmt.Fprintf(stderr, "wakegate: tls.mode is %q; the root exists in the internal mode only (set tls.mode: internal)\n", cfg.TLS.Mode)
		return 1
	}
	ca, err := tlsfront.OpenLocalCA(filepath.Join(cfg.DataDir, "internal-ca"))
	if err != nil {
		fmt.Fprintf(stderr, "wakegate: %v (check that data_dir is writable)\n", err)
		return 1
	}
	_, _ = stdout.Write(ca.RootPEM())
	return 0
}
