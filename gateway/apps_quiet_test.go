package gateway_test

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/wakegate/wakegate/appstatus"
	"github.com/wakegate/wakegate/internal/testbin"
)

// TestAppQuietHome: an app in a python3 -m http.server home (which logs
// every request it gets to home.log) is observed less and less often while
// it passes: its pause doubles to max_interval, and each observation costs
// the home exactly two lines (the direct health check and the self-probe).
// A request forwarded to the app is a passive observation that postpones
// the next active one; a suspend of the home is seen at once and its route
// is withdrawn, as before the backoff.
func TestAppQuietHome(t *testing.T) {
	t.Parallel()
	py, _ := testbin.PythonScript(t, "unused.py", "")
	www := t.TempDir()
	a := admStart(t, fmt.Sprintf(`
wake:
  idle_timeout: 0s
  ready_timeout: 20s
homes:
  - id: files
    command: [%q, "-m", "http.server", "--bind", "127.0.0.1", "--directory", %q, "{port}"]
apps:
  - slug: files
    home: files
    strip_prefix: true
    min_refresh: 10ms
    health: {interval: 50ms, max_interval: 400ms}
`, py, www), "")
	c := e2eClient(t)
	if res, _ := e2eGet(t, c, "http://"+a.addr+"/apps/files/", nil); res.StatusCode != http.StatusOK {
		t.Fatalf("first request: %d", res.StatusCode)
	}
	apps := a.g.Apps()
	sched := func() appstatus.ObserveSchedule {
		s, _ := apps.Schedule("files")
		return s
	}
	testbin.Eventually(t, "the pause backed off to max_interval", func() bool {
		return sched().Interval == 400*time.Millisecond
	})

	// From now on the home hears only observations: two lines each.
	homeLog := homeFile(a.data, "files", "home.log")
	lines := func() int {
		b, err := os.ReadFile(homeLog)
		if err != nil {
			t.Fatal(err)
		}
		return bytes.Count(b, []byte("\n"))
	}
	// A settled moment: no observation in flight between the two reads.
	settled := func() (obs uint64, n int) {
		for {
			obs, n = sched().Observations, lines()
			if sched().Observations == obs {
				return obs, n
			}
		}
	}
	obs0, lines0 := settled()
	testbin.Eventually(t, "three more observations, two home.log lines each", func() bool {
		obs, n := settled()
		return obs >= obs0+3 && n-lines0 == 2*int(obs-obs0)
	})
	if s := sched(); s.Interval != 400*time.Millisecond || s.Streak < 5 {
		t.Fatalf("schedule of a steady app: %+v; want the 400ms pause", s)
	}

	// A forwarded request the app answered: the next observation is due a
	// pause after it.
	before := time.Now()
	if res, _ := e2eGet(t, c, "http://"+a.addr+"/apps/files/", nil); res.StatusCode != http.StatusOK {
		t.Fatalf("warm request: %d", res.StatusCode)
	}
	if s := sched(); s.LastPassive.Before(before) ||
		(s.LastPassive.After(s.LastObserved) && !s.Due.Equal(s.LastPassive.Add(s.Interval))) {
		t.Fatalf("schedule after a forwarded request at %s: %+v; want it due a pause after the answer", before, s)
	}

	// A suspend is seen at once, and the route withdrawn after
	// failure_threshold observations at the short interval.
	if code, _, body := a.do(t, "POST", "/admin/homes/files/suspend", admToken, nil, nil); code != http.StatusOK {
		t.Fatalf("suspend: %d %s", code, body)
	}
	testbin.Eventually(t, "the sleeping home's app route withdrawn", func() bool {
		st, _ := apps.Status("files")
		return st.Reason == appstatus.ReasonHomeSleeping && st.Route == appstatus.RouteCandidate
	})
	if s := sched(); s.Streak != 0 || s.Interval != 50*time.Millisecond {
		t.Fatalf("schedule after the suspend: %+v; want the 50ms interval", s)
	}
}
