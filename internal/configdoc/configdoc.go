// Command configdoc writes docs/config.md, the configuration reference,
// from the doc comments of config.Config and every type it reaches
// (including access.Config, access.LimitsConfig and registry.App). Run it
// from the module root after changing a config type:
//
//	go run ./internal/configdoc
//
// With -check it writes nothing and exits 1 when docs/config.md differs
// from what it would write.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
)

func main() {
	check := flag.Bool("check", false, "exit 1 when docs/config.md is stale instead of writing it")
	out := flag.String("out", "docs/config.md", "the file to write")
	flag.Parse()
	doc, err := Generate(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "configdoc:", err)
		os.Exit(1)
	}
	if *check {
		old, err := os.ReadFile(*out)
		if err != nil || !bytes.Equal(old, doc) {
			fmt.Fprintf(os.Stderr, "configdoc: %s is stale: run go run ./internal/configdoc\n", *out)
			os.Exit(1)
		}
		return
	}
	if err := os.WriteFile(*out, doc, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "configdoc:", err)
		os.Exit(1)
	}
}
