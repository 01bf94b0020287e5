package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/wakerecord"
)

// hostile is text a home controls, full of terminal controls.
const hostile = "\x1b]0;OWNED\a\x1b[31m\u202e\u009b\r"

// TestPrintersEscapeHomeText fills every home-controlled field the status
// table, home get and app get print with hostile text and checks no
// control reaches the output.
func TestPrintersEscapeHomeText(t *testing.T) {
	h := admin.HomeView{ID: "h1", Target: hostile, Status: "failed", Reason: hostile + "\nlast line", Version: hostile,
		Verdict: hostile, Provider: hostile}
	h.Wakes = []wakerecord.Record{{Cause: hostile, Outcome: hostile, Error: hostile}}
	h.LastWake = &h.Wakes[0]
	a := admin.AppView{Slug: "a", Kind: hostile, Phase: hostile, Reason: hostile, Message: hostile, Hint: hostile}
	var out bytes.Buffer
	printStatus(&out, admin.Status{Version: hostile, Instance: hostile, Homes: []admin.HomeView{h}, Apps: []admin.AppView{a},
		Problems: []string{hostile}})
	hb, _ := json.Marshal(h)
	if err := printHomeDetail(&out, hb); err != nil {
		t.Fatal(err)
	}
	ab, _ := json.Marshal(a)
	if err := printAppDetail(&out, ab); err != nil {
		t.Fatal(err)
	}
	if !isSafe(out.String(), true) {
		t.Errorf("printed raw controls:\n%q", out.String())
	}
	if !strings.Contains(out.String(), `\x1b]0;OWNED\x07`) {
		t.Errorf("the title change is not shown escaped:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "\nlast line") && !strings.Contains(out.String(), `\nlast line`) {
		t.Errorf("the reason's second line is gone:\n%s", out.String())
	}
}
