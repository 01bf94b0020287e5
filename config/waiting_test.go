package config_test

import (
	"strings"
	"testing"

	"github.com/wakegate/wakegate/provider/all"
)

// TestWaitingThemes: wake.waiting_theme, homes[].waiting_theme and
// apps[].waiting_theme pick a built-in page; a name that is none of them
// is an error with the file, the line and the field that lists the valid
// names, and so is a theme beside wake.waiting_page.
func TestWaitingThemes(t *testing.T) {
	cfg, err := all.Load("ok.yaml", []byte(`wake:
  waiting_theme: dark
homes:
  - id: a
    waiting_theme: minimal
  - id: b
apps:
  - slug: s
    home: a
    waiting_theme: plain
`))
	if err != nil {
		t.Fatal(err)
	}
	if tmpl := cfg.Wake.WaitingTemplate(); tmpl == nil || tmpl.Theme() != "dark" {
		t.Errorf("wake.waiting_theme dark: %v", tmpl)
	}
	if a, b := cfg.WaitingTheme("a"), cfg.WaitingTheme("b"); a != "minimal" || b != "" {
		t.Errorf("home themes %q, %q; want minimal and none", a, b)
	}
	if got := cfg.Apps[0].WaitingTheme; got != "plain" {
		t.Errorf("app theme %q", got)
	}
	cfg, err = all.Load("ok.yaml", []byte("homes:\n  - id: a\n"))
	if err != nil || cfg.Wake.WaitingTemplate() != nil {
		t.Errorf("no theme: %v, %v; want the default page", err, cfg.Wake.WaitingTemplate())
	}

	_, err = all.Load("bad.yaml", []byte(`wake:
  waiting_theme: neon
homes:
  - id: a
    waiting_theme: Dark
apps:
  - slug: s
    home: a
    waiting_theme: fancy
`))
	if err == nil {
		t.Fatal("unknown themes loaded")
	}
	const names = "want one of default, plain, dark, minimal"
	for _, want := range []string{
		`bad.yaml:2: wake.waiting_theme: unknown theme "neon": ` + names,
		`bad.yaml:5: homes[0].waiting_theme: unknown theme "Dark": ` + names,
		`bad.yaml:9: apps[0].waiting_theme: unknown theme "fancy": ` + names,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}

	_, err = all.Load("both.yaml", []byte("wake:\n  waiting_page: /dev/null\n  waiting_theme: plain\n"))
	if err == nil || !strings.Contains(err.Error(), "both.yaml:3: wake.waiting_theme: set wake.waiting_page (your own page) or waiting_theme") {
		t.Errorf("a theme beside an own page: %v", err)
	}
}
