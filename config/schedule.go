package config

import (
	"fmt"

	"github.com/wakegate/wakegate/schedule"
)

// ScheduleConfig is a home's running hours (docs/schedules.md): inside a
// keep-awake window the gateway keeps the home awake, waking it when the
// window starts and never suspending it for idleness; outside, the home's
// idle timeout applies as usual. An operator's suspend is obeyed inside a
// window too: the home stays down until its next window starts. A reload
// applies a changed schedule.
type ScheduleConfig struct {
	// Timezone is the IANA time zone of the windows' times, such as
	// "Europe/Berlin"; the gateway carries the zone database, so any name
	// loads on any machine. Default (and when empty): "UTC".
	Timezone string `yaml:"timezone"`
	// KeepAwake are the windows, each "[days ]HH:MM-HH:MM": "Mon-Fri
	// 08:00-18:00", "Sat,Sun 10:00-14:00", "07:30-19:00" (every day). A
	// window whose end is not after its start crosses midnight: "Fri
	// 22:00-02:00" runs from Friday 22:00 to Saturday 02:00; 24:00 may end
	// a window. Default none (and an empty list): no running hours, which
	// turns wake.schedule off for a home.
	KeepAwake []string `yaml:"keep_awake"`
}

// compile is s as the engine reads it, and the problems of its fields
// (timezone, keep_awake[i]); nil for no schedule or an empty one.
func (s *ScheduleConfig) compile() (*schedule.Schedule, [][2]string) {
	if s == nil || len(s.KeepAwake) == 0 {
		return nil, nil
	}
	var probs [][2]string
	ws := make([]schedule.Window, 0, len(s.KeepAwake))
	for i, e := range s.KeepAwake {
		w, err := schedule.ParseWindow(e)
		if err != nil {
			probs = append(probs, [2]string{fmt.Sprintf("keep_awake[%d]", i), err.Error()})
		}
		ws = append(ws, w)
	}
	tz := s.Timezone
	if tz == "" {
		tz = "UTC"
	}
	sch, err := schedule.New(tz, ws)
	if err != nil {
		probs = append(probs, [2]string{"timezone", err.Error()})
	}
	if len(probs) > 0 {
		return nil, probs
	}
	return sch, nil
}

// checkSchedules reports the problems of wake.schedule and of each home's
// own schedule (a home that inherits wake.schedule is not reported again).
func (c *Config) checkSchedules(k checker) {
	report := func(k checker, s *ScheduleConfig) {
		_, probs := s.compile()
		for _, p := range probs {
			k.bad(p[0], "%s", p[1])
		}
	}
	report(k.in("wake.schedule"), c.Wake.Schedule)
	for i := range c.Homes {
		if h := &c.Homes[i]; h.Schedule != c.Wake.Schedule {
			report(k.in(fmt.Sprintf("homes[%d].schedule", i)), h.Schedule)
		}
	}
}
