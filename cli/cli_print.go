package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/appstatus"
	"github.com/wakegate/wakegate/provider"
	"github.com/wakegate/wakegate/wakerecord"
)

// printHomeDetail prints one home for people: its state, sessions, roll
// state, last wakes with their phase timings, and restarts.
func printHomeDetail(w io.Writer, body []byte) error {
	var h admin.HomeView
	if err := json.Unmarshal(body, &h); err != nil {
		return fmt.Errorf("decode home: %w", err)
	}
	status := h.Status
	if h.Wake != nil {
		status = "waking/" + h.Wake.Phase
	}
	fmt.Fprintf(w, "home %s  /node/%s  %s  provider %s  version %s  generation %d\n",
		cell(h.ID), cell(h.Target), cell(status), cell(h.Provider), cell(h.Version), h.Generation)
	if h.Reason != "" {
		fmt.Fprintln(w, "reason:", safeText(h.Reason, true))
	}
	verdict := h.Verdict
	if h.VerdictAgeS != nil {
		verdict += ", proven ready " + secs(*h.VerdictAgeS) + " ago"
	}
	if h.Warm {
		verdict += " (warm)"
	}
	fmt.Fprintln(w, "verdict:", cell(verdict))
	if k := h.SessionKinds; k != nil {
		fmt.Fprintf(w, "sessions: %d requests, %d WebSockets, %d leases\n", k.Requests, k.WebSockets, len(k.Leases))
		for _, l := range k.Leases {
			fmt.Fprintf(w, "  lease %s expires %s\n", cell(l.Lease), when(l.ExpiresAt))
		}
	}
	if u := h.Usage; u != nil {
		fmt.Fprintln(w, usageLine(*u))
	}
	switch {
	case h.IdleTimeout == "0s":
		fmt.Fprintln(w, "idle suspend: never (idle_timeout 0s)")
	case h.SuspendInS != nil:
		fmt.Fprintf(w, "idle suspend: in %s (idle_timeout %s)\n", secs(*h.SuspendInS), h.IdleTimeout)
	default:
		fmt.Fprintf(w, "idle suspend: not due (idle_timeout %s)\n", h.IdleTimeout)
	}
	if r := h.Roll; r != nil {
		line := "roll: " + r.State
		if r.TargetVersion != "" {
			line += ", target " + r.TargetVersion
		}
		if r.BadVersion != "" {
			line += ", bad version " + r.BadVersion
		}
		fmt.Fprintln(w, cell(line))
	}
	if s := h.LastStop; s != nil {
		fmt.Fprintf(w, "stop after the last failed wake: %s, proven %t %s\n", when(s.At), s.Proven, safeText(s.Error, true))
	}
	printWakes(w, h.Wakes)
	if len(h.Restarts) > 0 {
		fmt.Fprintln(w, "\nRestarts (oldest first):")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TIME\tOLD PID\tNEW PID\tEXIT\tOUTCOME")
		for _, r := range h.Restarts {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", when(r.Time), r.OldPID, r.NewPID, cell(r.ExitReason), cell(r.Outcome))
		}
		_ = tw.Flush()
	}
	return nil
}

// printWakes prints wakes, newest first, with their phase timings.
func printWakes(w io.Writer, wakes []wakerecord.Record) {
	if len(wakes) == 0 {
		fmt.Fprintln(w, "\nNo wake finished here since the gateway started.")
		return
	}
	fmt.Fprintln(w, "\nWakes (newest first):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STARTED\tCAUSE\tJOINED\tPROVIDER\tPROBE\tTOTAL\tOUTCOME\tSTOP")
	for _, r := range wakes {
		stop := ""
		if r.StopProven != nil {
			stop = "not proven"
			if *r.StopProven {
				stop = "proven"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", when(r.At), cell(r.Cause), r.Joined,
			dur(r.ProviderMS), dur(r.ProbeMS), dur(r.TotalMS), cell(r.Outcome), stop)
	}
	_ = tw.Flush()
	for _, r := range wakes {
		if r.Error != "" {
			fmt.Fprintf(w, "  %s failed: %s\n", when(r.At), safeText(r.Error, true))
		}
	}
}

// printAppDetail prints one app for people: its phase, route state and
// phase history.
func printAppDetail(w io.Writer, body []byte) error {
	var a admin.AppView
	if err := json.Unmarshal(body, &a); err != nil {
		return fmt.Errorf("decode app: %w", err)
	}
	on := a.Upstream
	if a.Home != "" {
		on = "home " + a.Home
	}
	fmt.Fprintf(w, "app %s  /apps/%s/  %s on %s  source %s\n", cell(a.Slug), cell(a.Slug), cell(a.Kind), cell(on), cell(a.Source))
	fmt.Fprintf(w, "phase: %s (%s): %s\n", cell(a.Phase), cell(a.Reason), safeText(a.Message, true))
	if a.Hint != "" {
		fmt.Fprintf(w, "hint: %s\n", safeText(a.Hint, true))
	}
	fmt.Fprintf(w, "route: %s\n", routeWords(a.Route))
	if a.Operation != "" {
		fmt.Fprintln(w, "operation:", cell(a.Operation))
	}
	if c := a.Checks; c != nil {
		fmt.Fprintf(w, "checks: every %s now (%d passed in a row, %d sent)", time.Duration(c.IntervalMS)*time.Millisecond, c.Streak, c.Sent)
		if c.NextCheck != nil {
			fmt.Fprintf(w, ", next %s", when(*c.NextCheck))
		}
		fmt.Fprintln(w)
	}
	if len(a.Phases) > 0 {
		fmt.Fprintln(w, "\nPhase changes (newest first):")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "AT\tPHASE\tREASON\tMESSAGE")
		for _, p := range a.Phases {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", when(p.At), cell(string(p.Phase)), cell(p.Reason), cell(p.Message))
		}
		_ = tw.Flush()
	}
	return nil
}

// routeWords says what a route state means.
func routeWords(state string) string {
	switch state {
	case string(appstatus.RoutePublished):
		return "published (everyone reaches the app)"
	case string(appstatus.RouteCandidate):
		return "candidate (only the gateway's self-probe reaches the app)"
	case "":
		return "none (not routed yet)"
	}
	return cell(strings.TrimSpace(state))
}

// usageLine is what a home's processes use now, with its limits.
func usageLine(u provider.Usage) string {
	line := fmt.Sprintf("usage: %d processes, %.1fs CPU", u.Processes, u.CPUSeconds)
	if u.MemoryBytes > 0 {
		line += ", memory " + mib(u.MemoryBytes)
		if u.MemoryMaxBytes > 0 {
			line += " of " + mib(u.MemoryMaxBytes)
		}
	} else if u.MemoryMaxBytes > 0 {
		line += ", memory_max " + mib(u.MemoryMaxBytes)
	}
	if u.OOMKills > 0 {
		line += fmt.Sprintf(", %d killed over memory_max", u.OOMKills)
	}
	if u.CPUMax > 0 {
		line += fmt.Sprintf(", cpu_max %g cores", u.CPUMax)
		if u.CPUThrottled > 0 {
			line += fmt.Sprintf(" (held back %.1fs)", u.CPUThrottledSeconds)
		}
	}
	return line
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
