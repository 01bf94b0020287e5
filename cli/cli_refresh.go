package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/provider"
)

// printRefresh prints the answer of `home refresh ID`: what the provider
// said, what changed and what follows, and the reason and the hint when
// the provider did not say what state the home is in (exit 1 then).
func printRefresh(w io.Writer, body []byte) int {
	var v admin.RefreshView
	if err := json.Unmarshal(body, &v); err != nil || v.Refresh.Home == "" {
		_, _ = w.Write(body)
		return 0
	}
	r := v.Refresh
	changed := "nothing"
	if len(r.Changed) > 0 {
		changed = strings.Join(r.Changed, ", ")
	}
	fmt.Fprintf(w, "home %s: provider says %s; record %s -> %s; changed: %s\n", cell(r.Home), cell(string(r.Provider)), cell(string(r.Before)), cell(string(r.After)), cell(changed))
	fmt.Fprintf(w, "  %s\n", safeText(r.Message, true))
	if r.Reason != "" {
		fmt.Fprintf(w, "  reason: %s\n", safeText(r.Reason, true))
	}
	if r.Hint != "" {
		fmt.Fprintf(w, "  hint: %s\n", safeText(r.Hint, true))
	}
	if r.Provider == provider.StateUnknown {
		return 1
	}
	return 0
}
