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
// fails the load (or a reload) rather than a visitor, and each home's
// display_name.
func (c *Config) validatePages(k checker) {
	c.Wake.waitingTmpl = nil
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
	c.displayNames = map[string]string{}
	for i, h := range c.Homes {
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
