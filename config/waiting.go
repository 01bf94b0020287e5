package config

import (
	"fmt"
	"os"
	"unicode"
	"unicode/utf8"

	"github.com/wakegate/wakegate/web"
)

// maxDisplayName caps homes[].display_name, in characters.
const maxDisplayName = 100

// validatePages checks what the waiting page shows: the operator's own
// template (wake.waiting_page), read and parsed here so that a bad one
// fails the load (or a reload) rather than a visitor, or the built-in
// theme (wake.waiting_theme), and each home's display_name and theme.
func (c *Config) validatePages(k checker) {
	c.Wake.waitingTmpl = nil
	k.theme("wake.waiting_theme", c.Wake.WaitingTheme)
	if c.Wake.WaitingTheme != "" && c.Wake.WaitingPage != "" {
		k.bad("wake.waiting_theme", "set wake.waiting_page (your own page) or waiting_theme (a built-in one), not both")
	}
	if t, ok := web.Theme(c.Wake.WaitingTheme); ok {
		c.Wake.waitingTmpl = t
	}
	if p := c.Wake.WaitingPage; p != "" {
		text, err := os.ReadFile(p)
		switch {
		case err != nil:
			k.bad("wake.waiting_page", "read the template: %v", err)
		default:
			t, err := web.ParseWaiting(p, string(text))
			if err != nil {
				k.bad("wake.waiting_page", "bad template: %v", err)
			}
			c.Wake.waitingTmpl = t
		}
	}
	c.displayNames, c.homeThemes = map[string]string{}, map[string]string{}
	for i, h := range c.Homes {
		if h.WaitingTheme != "" {
			k.theme(fmt.Sprintf("homes[%d].waiting_theme", i), h.WaitingTheme)
			c.homeThemes[h.ID] = h.WaitingTheme
		}
		if h.DisplayName == "" {
			continue
		}
		field := fmt.Sprintf("homes[%d].display_name", i)
		switch n := utf8.RuneCountInString(h.DisplayName); {
		case n > maxDisplayName:
			k.bad(field, "at most %d characters, got %d", maxDisplayName, n)
		case !printable(h.DisplayName):
			k.bad(field, "must be printable text on one line")
		}
		c.displayNames[h.ID] = h.DisplayName
	}
}

// theme reports a waiting_theme that names no built-in page.
func (k checker) theme(field, name string) {
	if err := web.CheckTheme(name); err != nil {
		k.bad(field, "%v", err)
	}
}

// printable reports whether s is valid UTF-8 with no control character.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}
