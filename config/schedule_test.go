package config_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/config"
	"github.com/wakegate/wakegate/provider/all"
)

// A bad schedule is an error naming its file, line, field and entry: an
// unknown time zone, a window that does not parse, an empty window; a
// home that inherits a bad wake.schedule is not reported again.
func TestScheduleErrorsNameTheEntry(t *testing.T) {
	text := `
wake:
  schedule:
    timezone: Europe/Berlinn
    keep_awake: ["Mon-Fri 08:00-18:00"]
homes:
  - id: a
    schedule:
      timezone: Europe/Berlin
      keep_awake:
        - "Mon-Fri 08:00-18:00"
        - "Mon-Fry 08:00-18:00"
        - "Sat 10:00-10:00"
        - "Sun 9:00-12:00"
  - id: b
`
	_, err := all.Load("sched.yaml", []byte(text))
	if err == nil {
		t.Fatal("bad schedules loaded")
	}
	for _, want := range []string{
		`sched.yaml:4: wake.schedule.timezone: unknown time zone "Europe/Berlinn"`,
		`sched.yaml:12: homes[0].schedule.keep_awake[1]: want days such as Mon, Mon-Fri or Sat,Sun; "Fry" is not a day`,
		`sched.yaml:13: homes[0].schedule.keep_awake[2]: window "10:00-10:00" is empty`,
		`sched.yaml:14: homes[0].schedule.keep_awake[3]: want a time HH:MM`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("errors lack %q:\n%v", want, err)
		}
	}
	if n := strings.Count(err.Error(), "timezone"); n != 1 {
		t.Errorf("the bad wake.schedule is reported %d times, want once (not again for home b):\n%v", n, err)
	}
}

// A home's schedule is its own, else wake.schedule; schedule: {} turns the
// default off; a window that crosses midnight is accepted. The home's
// declaration carries the parsed schedule, in its time zone.
func TestScheduleDefaultsAndDecl(t *testing.T) {
	text := `
wake:
  schedule: {timezone: Europe/Berlin, keep_awake: ["Mon-Fri 08:00-18:00"]}
homes:
  - id: inherits
  - id: own
    schedule: {keep_awake: ["Fri 22:00-02:00"]}
  - id: none
    schedule: {}
`
	cfg, err := all.Load("sched.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	wed0730UTC := time.Date(2026, 1, 14, 7, 30, 0, 0, time.UTC) // 08:30 in Berlin
	sat0100UTC := time.Date(2026, 1, 17, 1, 0, 0, 0, time.UTC)
	for i, c := range []struct {
		id           string
		wed, sat, on bool
	}{{"inherits", true, false, true}, {"own", false, true, true}, {"none", false, false, false}} {
		decl, err := cfg.Homes[i].Decl()
		if err != nil || decl.ID != c.id {
			t.Fatalf("home %d: %+v, %v; want %s", i, decl, err, c.id)
		}
		d := decl.Schedule
		if (d != nil) != c.on {
			t.Fatalf("%s: schedule %v, want one: %v", c.id, d, c.on)
		}
		if got := d.Contains(wed0730UTC); got != c.wed {
			t.Errorf("%s: Wednesday 08:30 Berlin inside = %v, want %v", c.id, got, c.wed)
		}
		if got := d.Contains(sat0100UTC); got != c.sat {
			t.Errorf("%s: Saturday 01:00 UTC inside = %v, want %v", c.id, got, c.sat)
		}
	}
}

// A reload that changes wake.schedule names it among the settings it
// applies.
func TestScheduleIsReloadable(t *testing.T) {
	load := func(zone string) *config.Config {
		t.Helper()
		c, err := all.Load("sched.yaml", []byte("wake:\n  schedule: {timezone: "+zone+", keep_awake: [\"08:00-18:00\"]}\n"))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	cur := load("Europe/Berlin")
	if got := config.ReloadableChanges(cur, load("Europe/Berlin")); len(got) != 0 {
		t.Errorf("the same schedule: changes %v, want none", got)
	}
	if got := config.ReloadableChanges(cur, load("UTC")); !slices.Contains(got, "wake.schedule") {
		t.Errorf("another zone: changes %v, want wake.schedule among them", got)
	}
}
