package schedule

import (
	"strings"
	"testing"
	"time"
)

func mustSchedule(t *testing.T, tz string, windows ...string) *Schedule {
	t.Helper()
	var ws []Window
	for _, s := range windows {
		w, err := ParseWindow(s)
		if err != nil {
			t.Fatalf("ParseWindow(%q): %v", s, err)
		}
		ws = append(ws, w)
	}
	s, err := New(tz, ws)
	if err != nil {
		t.Fatalf("New(%q): %v", tz, err)
	}
	return s
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestParseWindowErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "want \"[days ]HH:MM-HH:MM\""},
		{"Mon Fri 08:00-18:00", "want \"[days ]HH:MM-HH:MM\""},
		{"Mon-Fry 08:00-18:00", `"Fry" is not a day`},
		{"Mon-Fri 08:00", "want a time span"},
		{"Mon-Fri 8:00-18:00", `got "8:00"`},
		{"Mon-Fri 08:00-18:60", `got "18:60"`},
		{"24:00-02:00", `got "24:00"`},
		{"08:00-25:00", `got "25:00"`},
		{"Sat 10:00-10:00", "is empty"},
	} {
		_, err := ParseWindow(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseWindow(%q) = %v, want an error with %q", c.in, err, c.want)
		}
	}
}

func TestNewRefusesUnknownZone(t *testing.T) {
	for _, tz := range []string{"Europe/Berlinn", "", "Local"} {
		if _, err := New(tz, nil); err == nil {
			t.Errorf("New(%q) = nil error", tz)
		}
	}
}

func TestContains(t *testing.T) {
	berlin := mustSchedule(t, "Europe/Berlin", "Mon-Fri 08:00-18:00", "Sat 10:00-14:00")
	night := mustSchedule(t, "UTC", "Fri 22:00-02:00")
	wrap := mustSchedule(t, "UTC", "Sat-Sun 00:00-24:00")
	dst := mustSchedule(t, "Europe/Berlin", "Sun 01:00-04:00")
	var none *Schedule
	for _, c := range []struct {
		name string
		s    *Schedule
		at   string
		want bool
	}{
		{"weekday inside (CET)", berlin, "2026-01-14T07:00:00Z", true}, // Wed 08:00 CET
		{"weekday before", berlin, "2026-01-14T06:59:00Z", false},      // Wed 07:59
		{"weekday end is outside", berlin, "2026-01-14T17:00:00Z", false},
		{"weekday inside (CEST)", berlin, "2026-07-15T06:00:00Z", true}, // Wed 08:00 CEST
		{"CEST offset applies", berlin, "2026-07-15T16:30:00Z", false},  // Wed 18:30 CEST
		{"saturday window", berlin, "2026-01-17T12:00:00Z", true},       // Sat 13:00
		{"saturday after", berlin, "2026-01-17T13:00:00Z", false},       // Sat 14:00
		{"sunday", berlin, "2026-01-18T10:00:00Z", false},
		{"night, start day evening", night, "2026-01-16T23:00:00Z", true}, // Fri
		{"night, morning after", night, "2026-01-17T01:59:00Z", true},     // Sat
		{"night, its end", night, "2026-01-17T02:00:00Z", false},
		{"night, thursday evening", night, "2026-01-15T23:00:00Z", false},
		{"night, friday morning", night, "2026-01-16T01:00:00Z", false},
		{"24:00 end, sunday late", wrap, "2026-01-18T23:59:00Z", true},
		{"24:00 end, monday", wrap, "2026-01-19T00:00:00Z", false},
		{"DST spring: skipped hour's after", dst, "2026-03-29T01:00:00Z", true}, // 03:00 CEST
		{"DST spring: before", dst, "2026-03-28T23:59:00Z", false},              // 00:59 CET
		{"DST spring: end", dst, "2026-03-29T02:00:00Z", false},                 // 04:00 CEST
		{"DST autumn: repeated hour, first", dst, "2026-10-25T00:30:00Z", true}, // 02:30 CEST
		{"DST autumn: repeated hour, second", dst, "2026-10-25T01:30:00Z", true},
		{"DST autumn: end", dst, "2026-10-25T03:00:00Z", false}, // 04:00 CET
		{"nil schedule", none, "2026-01-14T10:00:00Z", false},
	} {
		if got := c.s.Contains(utc(c.at)); got != c.want {
			t.Errorf("%s: Contains(%s) = %v, want %v", c.name, c.at, got, c.want)
		}
	}
}

func TestNext(t *testing.T) {
	berlin := mustSchedule(t, "Europe/Berlin", "Mon-Fri 08:00-18:00", "Sat 10:00-14:00")
	night := mustSchedule(t, "UTC", "Fri 22:00-02:00")
	skipped := mustSchedule(t, "Europe/Berlin", "Sun 02:30-05:00")
	repeated := mustSchedule(t, "Europe/Berlin", "Sun 02:30-05:00")
	for _, c := range []struct {
		name string
		s    *Schedule
		at   string
		want string
	}{
		{"later today", berlin, "2026-01-14T05:00:00Z", "2026-01-14T07:00:00Z"},
		{"inside: the next day's", berlin, "2026-01-14T07:00:00Z", "2026-01-15T07:00:00Z"},
		{"friday evening: saturday", berlin, "2026-01-16T18:00:00Z", "2026-01-17T09:00:00Z"},
		{"saturday after: monday", berlin, "2026-01-17T14:00:00Z", "2026-01-19T07:00:00Z"},
		{"over spring DST: monday 08:00 CEST", berlin, "2026-03-28T14:00:00Z", "2026-03-30T06:00:00Z"},
		{"over autumn DST: monday 08:00 CET", berlin, "2026-10-24T14:00:00Z", "2026-10-26T07:00:00Z"},
		{"across midnight: next friday", night, "2026-01-17T01:00:00Z", "2026-01-23T22:00:00Z"},
		{"skipped start: at the change", skipped, "2026-03-28T12:00:00Z", "2026-03-29T01:00:00Z"},
		{"repeated start: the first", repeated, "2026-10-24T12:00:00Z", "2026-10-25T00:30:00Z"},
	} {
		got := c.s.Next(utc(c.at))
		if !got.Equal(utc(c.want)) {
			t.Errorf("%s: Next(%s) = %s, want %s", c.name, c.at, got.UTC().Format(time.RFC3339), c.want)
		}
	}
	var none *Schedule
	if got := none.Next(time.Now()); !got.IsZero() {
		t.Errorf("nil schedule: Next = %s, want zero", got)
	}
}

func TestStartsDue(t *testing.T) {
	daily := mustSchedule(t, "UTC", "08:00-09:00")
	other := mustSchedule(t, "UTC", "10:00-11:00")
	var st Starts
	step := func(at string, scheds map[string]*Schedule, want ...string) {
		t.Helper()
		got := st.Due(utc(at), scheds)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("Due(%s) = %v, want %v", at, got, want)
		}
	}
	step("2026-01-14T08:30:00Z", map[string]*Schedule{"a": daily})      // first seen inside: not due
	step("2026-01-15T07:59:59Z", map[string]*Schedule{"a": daily})      // before the start
	step("2026-01-15T08:00:00Z", map[string]*Schedule{"a": daily}, "a") // at the start
	step("2026-01-15T08:00:01Z", map[string]*Schedule{"a": daily})      // once
	step("2026-01-18T12:00:00Z", map[string]*Schedule{"a": daily}, "a") // missed starts: once
	step("2026-01-19T09:30:00Z", map[string]*Schedule{"a": other})      // a new schedule: its next start
	step("2026-01-19T10:00:00Z", map[string]*Schedule{"a": other}, "a")
	step("2026-01-20T10:00:00Z", map[string]*Schedule{})           // forgotten
	step("2026-01-21T10:00:00Z", map[string]*Schedule{"a": other}) // seen anew: not due
}
