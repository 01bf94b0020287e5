package config_test

import (
	"strings"
	"testing"
)

// TestConfigSyntaxErrorsSayWhatAndWhere: a file the YAML library cannot
// parse is reported at the line a person must fix, in words that name the
// problem: an unclosed [ or { at its own line (the library says one line
// early), a tab by name.
func TestConfigSyntaxErrorsSayWhatAndWhere(t *testing.T) {
	cases := []struct {
		name, text string
		line       int
		want       string
	}{
		{"unclosed list", "listen: \"127.0.0.1:0\"\nserver:\n  idle_timeout: 1s\nhomes: [\n  {id: a}\n", 4, "not closed with ]"},
		{"unclosed list inside", "listen: \"127.0.0.1:0\"\nserver:\n  idle_timeout: [1s\n", 3, "not closed with ]"},
		{"unclosed mapping", "listen: \"127.0.0.1:0\"\nserver: {idle_timeout: 1s\n", 2, "not closed with }"},
		{"tab", "listen: \"127.0.0.1:0\"\nserver:\n\tidle_timeout: 1s\n", 3, "tab"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := configErrors(t, "syntax.yaml", tc.text)
			if len(errs) != 1 || errs[0].Line != tc.line || !strings.Contains(errs[0].Error(), tc.want) {
				t.Errorf("errors %v; want one at line %d saying %q", errs, tc.line, tc.want)
			}
		})
	}
}

// TestConfigIDUsedAsTarget: an id the id rule allows but the target rule
// does not, with no target written, is reported at the id (the field the
// user wrote), saying that it is used as the target and how to fix it.
func TestConfigIDUsedAsTarget(t *testing.T) {
	errs := configErrors(t, "ids.yaml", "listen: \"127.0.0.1:0\"\nhomes:\n  - id: my_home\n")
	if len(errs) != 1 || errs[0].Line != 3 || errs[0].Field != "homes[0].id" ||
		!strings.Contains(errs[0].Msg, "target") || !strings.Contains(errs[0].Msg, "target: my-home") {
		t.Errorf("errors %#v; want one at homes[0].id saying the id is the target, suggesting my-home", errs)
	}
	errs = configErrors(t, "ids.yaml", "listen: \"127.0.0.1:0\"\nhomes:\n  - id: ok\n    target: Bad_Target\n")
	if len(errs) != 1 || errs[0].Field != "homes[0].target" {
		t.Errorf("errors %#v; want one at homes[0].target", errs)
	}
}
