package execprov

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/provider"
)

// A new run of the gateway (a second provider on the same data_dir) finds
// the process an earlier run left in the home's cgroup: it keeps it while
// the stored record names it, or while its own record does and no other
// gateway runs the home; once neither holds, it ends it.
func TestEndStraysKeepsWhatARecordNames(t *testing.T) {
	cfg := testConfig(testDataDir(t))
	earlier := newExec(t, cfg)
	if earlier.contain.mode != ContainCgroup {
		t.Skipf("no cgroup per home here (%s)", earlier.contain.why)
	}
	r := wake(t, earlier, provider.Spec{ID: "h1", Version: "v1"})
	ref, ok := parseRef(r.Ref)
	if !ok {
		t.Fatalf("unreadable ref %q", r.Ref)
	}
	earlier.Let("h1") // the earlier run no longer answers for it
	next := newExec(t, cfg)
	if got := next.Strays(); !slices.Equal(got, []string{"h1"}) {
		t.Fatalf("strays %v, want [h1]", got)
	}
	ctx := context.Background()
	for _, c := range []struct {
		name string
		spec provider.Spec
		mine bool
	}{
		{"the stored record names it", provider.Spec{ID: "h1", Ref: r.Ref}, false},
		{"the provider's own record names it and no other gateway runs the home", provider.Spec{ID: "h1"}, true},
	} {
		ended, err := next.EndStrays(ctx, c.spec, c.mine)
		if err != nil || len(ended) != 0 || !alive(ref.Identity) {
			t.Fatalf("%s: ended %v, %v; alive %v: want it kept", c.name, ended, err, alive(ref.Identity))
		}
	}
	ended, err := next.EndStrays(ctx, provider.Spec{ID: "h1"}, false)
	if err != nil || !slices.Contains(ended, ref.PID) {
		t.Fatalf("no record another gateway could adopt it by: ended %v, %v; want %d", ended, err, ref.PID)
	}
	testbin.Eventually(t, "the stray to be gone", func() bool { return !alive(ref.Identity) })
	if got := next.Strays(); len(got) != 0 {
		t.Fatalf("strays %v after the end, want none", got)
	}
	if l := homeLog(t, next, "h1"); !strings.Contains(l, "named by no record") {
		t.Fatalf("the home's log does not say why its process was killed:\n%s", l)
	}
}
