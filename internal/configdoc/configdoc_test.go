package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestConfigDocIsCurrent fails when docs/config.md is not what the
// generator writes from the config types' doc comments now.
func TestConfigDocIsCurrent(t *testing.T) {
	want, err := Generate("../..")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("docs/config.md is stale: run `go run ./internal/configdoc` from the module root and commit the result")
	}
}

// TestConfigDocCoversFields: the reference names fields from every
// section, nested sections and lists, and every field has a doc comment.
func TestConfigDocCoversFields(t *testing.T) {
	doc, err := Generate("../..")
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	for _, key := range []string{"`listen`", "`wake.probe.kind`", "`homes[].relay_token`", "`apps[].health.path`",
		"`access.policies[].jwt`", "`limits.client_rate`", "`server.root_redirect`", "`exec.command`"} {
		if !strings.Contains(s, key) {
			t.Errorf("the reference lacks %s", key)
		}
	}
	if strings.Contains(s, noDoc) {
		for _, l := range strings.Split(s, "\n") {
			if strings.Contains(l, noDoc) {
				t.Errorf("undocumented: %s", l)
			}
		}
	}
}
