// Package schedule holds a home's running hours: keep-awake windows on
// days of the week, in one time zone, during which the lifecycle engine
// keeps the home awake (it wakes it at each window's start and never
// idle-suspends it inside one). It parses the windows of the config's
// schedule sections and answers two questions, Contains and Next; the
// engine (package wake) asks them.
//
// A window is "[days ]HH:MM-HH:MM": days are a day ("Mon"), a range
// ("Mon-Fri", "Fri-Mon" wraps over the week's end) or a list of either
// ("Mon,Wed,Fri-Sat"); without days it runs every day. Times are wall-clock
// times in the schedule's zone; 24:00 may end a window. A window whose end
// is not after its start crosses midnight: "Fri 22:00-02:00" runs from
// Friday 22:00 to Saturday 02:00 (its days name the days it starts on). A
// window that starts in a time the zone skips (a DST change) starts when
// the clock resumes; one in a time the zone repeats starts at its first
// occurrence.
//
// The zone database is embedded (time/tzdata), so a zone name loads on a
// machine without one.
//
// DESIGN rules that live here: none of its own; it serves the engine's
// idle suspends (package wake), which a window holds off, and its wakes,
// which a window's start begins.
package schedule

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // zone names load where the system has no zone database
)

// Window is one keep-awake window: the days it starts on and its wall
// clock start and end, in minutes after midnight.
type Window struct {
	days       [7]bool // by time.Weekday
	start, end int     // 0..1439 and 1..1440; end <= start crosses midnight
}

// Schedule is a set of windows in one time zone. A nil *Schedule has no
// window: it contains no time and has no next start. Its methods are safe
// for concurrent use.
type Schedule struct {
	loc     *time.Location
	windows []Window
}

// New returns the schedule of windows in the zone named tz (an IANA name
// such as "Europe/Berlin", or "UTC"); an unknown zone is an error.
func New(tz string, windows []Window) (*Schedule, error) {
	if tz == "" || tz == "Local" {
		return nil, fmt.Errorf("want an IANA time zone name such as Europe/Berlin or UTC, got %q", tz)
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q", tz)
	}
	return &Schedule{loc: loc, windows: windows}, nil
}

var dayNames = map[string]time.Weekday{
	"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday, "wed": time.Wednesday,
	"thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday,
}

// ParseWindow parses one window, "[days ]HH:MM-HH:MM" (see the package's
// doc).
func ParseWindow(s string) (Window, error) {
	var w Window
	fields := strings.Fields(s)
	var span string
	switch len(fields) {
	case 1:
		for i := range w.days {
			w.days[i] = true
		}
		span = fields[0]
	case 2:
		if err := w.parseDays(fields[0]); err != nil {
			return w, err
		}
		span = fields[1]
	default:
		return w, fmt.Errorf("want \"[days ]HH:MM-HH:MM\" such as \"Mon-Fri 08:00-18:00\", got %q", s)
	}
	from, to, ok := strings.Cut(span, "-")
	if !ok {
		return w, fmt.Errorf("want a time span HH:MM-HH:MM, got %q", span)
	}
	var err error
	if w.start, err = clock(from, false); err != nil {
		return w, err
	}
	if w.end, err = clock(to, true); err != nil {
		return w, err
	}
	if w.start == w.end {
		return w, fmt.Errorf("window %q is empty: its end equals its start", span)
	}
	return w, nil
}

// parseDays sets w's days from a list of days and day ranges.
func (w *Window) parseDays(s string) error {
	for part := range strings.SplitSeq(s, ",") {
		a, b, isRange := strings.Cut(part, "-")
		first, ok := dayNames[strings.ToLower(a)]
		if !ok {
			return fmt.Errorf("want days such as Mon, Mon-Fri or Sat,Sun; %q is not a day", a)
		}
		last := first
		if isRange {
			if last, ok = dayNames[strings.ToLower(b)]; !ok {
				return fmt.Errorf("want days such as Mon, Mon-Fri or Sat,Sun; %q is not a day", b)
			}
		}
		for d := first; ; d = (d + 1) % 7 {
			w.days[d] = true
			if d == last {
				break
			}
		}
	}
	return nil
}

// clock parses "HH:MM" as minutes after midnight; 24:00 only as an end.
func clock(s string, end bool) (int, error) {
	h, m, ok := strings.Cut(s, ":")
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	switch {
	case !ok || len(h) != 2 || len(m) != 2 || errors.Join(err1, err2) != nil || mm > 59 || hh < 0 || mm < 0:
		return 0, fmt.Errorf("want a time HH:MM (00:00 to 23:59, 24:00 as an end), got %q", s)
	case hh == 24 && mm == 0 && end:
		return 24 * 60, nil
	case hh > 23:
		return 0, fmt.Errorf("want a time HH:MM (00:00 to 23:59, 24:00 as an end), got %q", s)
	}
	return hh*60 + mm, nil
}

// Contains reports whether t falls inside one of s's windows.
func (s *Schedule) Contains(t time.Time) bool {
	if s == nil {
		return false
	}
	lt := t.In(s.loc)
	m := lt.Hour()*60 + lt.Minute()
	today, yesterday := lt.Weekday(), (lt.Weekday()+6)%7
	for _, w := range s.windows {
		if w.end > w.start {
			if w.days[today] && m >= w.start && m < w.end {
				return true
			}
			continue
		}
		// Across midnight: the evening of a start day, or the morning
		// after one.
		if w.days[today] && m >= w.start || w.days[yesterday] && m < w.end {
			return true
		}
	}
	return false
}

// Next returns the first window start after t, in t's location; the zero
// time when s has no window.
func (s *Schedule) Next(t time.Time) time.Time {
	if s == nil {
		return time.Time{}
	}
	lt := t.In(s.loc)
	var next time.Time
	// Each day of the coming week (and today's remaining starts) holds
	// every weekly start once.
	for i := range 8 {
		day := time.Date(lt.Year(), lt.Month(), lt.Day()+i, 12, 0, 0, 0, s.loc)
		for _, w := range s.windows {
			if !w.days[day.Weekday()] {
				continue
			}
			at := wallClock(day, w.start, s.loc)
			if at.After(t) && (next.IsZero() || at.Before(next)) {
				next = at
			}
		}
		if !next.IsZero() {
			return next.In(t.Location())
		}
	}
	return time.Time{}
}

// wallClock is minute m after midnight on day's date in loc. A wall time
// the zone skips is the instant its clock resumes; one it repeats is its
// first occurrence.
func wallClock(day time.Time, m int, loc *time.Location) time.Time {
	y, mo, d := day.Date()
	at := time.Date(y, mo, d, m/60, m%60, 0, 0, loc)
	if at.Hour()*60+at.Minute() != m {
		// Skipped: time.Date moved it past the change by the size of the
		// gap; the window starts at the change itself.
		start, _ := at.ZoneBounds()
		return start
	}
	// Repeated: time.Date may pick the later offset; take the earlier
	// instant with the same wall clock.
	if earlier := at.Add(-time.Hour); earlier.Hour() == at.Hour() && earlier.Minute() == at.Minute() {
		return earlier
	}
	return at
}

// Starts remembers, per key (a home's id), the next window start of its
// schedule, so that a caller that looks at a set of schedules now and then
// (the engine's idle loop, every tick) learns which windows began since it
// last looked. Its zero value is ready; it is not safe for concurrent use.
type Starts struct {
	next map[string]start
}

// start is a key's schedule and the window start it waits for.
type start struct {
	s  *Schedule
	at time.Time
}

// Due returns, in no order, the keys of scheds whose window started after
// the previous Due and at or before now. A key seen for the first time, or
// with another schedule than before, is due at its next start only: a
// window under way when it is first seen does not count. Starts missed
// between two calls count once. Keys absent from scheds are forgotten.
func (st *Starts) Due(now time.Time, scheds map[string]*Schedule) []string {
	var due []string
	next := make(map[string]start, len(scheds))
	for key, s := range scheds {
		cur, ok := st.next[key]
		switch {
		case !ok || cur.s != s:
			cur = start{s: s, at: s.Next(now)}
		case !cur.at.IsZero() && !cur.at.After(now):
			due = append(due, key)
			cur.at = s.Next(now)
		}
		next[key] = cur
	}
	st.next = next
	return due
}
