package execprov

import (
	"context"
	"testing"

	"github.com/wakegate/wakegate/provider"
)

// TestQuiesce stops every home's process: one this provider started, one
// it adopted, and one a previous provider left running that this one only
// knows by the id it is given; a home with no process is proven at once.
// A later Wake starts the home again. A home with no directory is not
// looked up at all.
func TestQuiesce(t *testing.T) {
	dir := testDataDir(t)
	cfg := testConfig(dir)
	old := newExec(t, cfg)
	left := wake(t, old, provider.Spec{ID: "left", Target: "left"})
	adopted := wake(t, old, provider.Spec{ID: "adopted", Target: "adopted"})
	waitReady(t, left.Endpoint)
	waitReady(t, adopted.Endpoint)
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	e := newExec(t, cfg)
	started := wake(t, e, provider.Spec{ID: "started", Target: "started"})
	waitReady(t, started.Endpoint)
	if r := wake(t, e, provider.Spec{ID: "adopted", Target: "adopted", Ref: adopted.Ref}); r.Ref != adopted.Ref {
		t.Fatalf("adopting wake %+v, want %+v", r, adopted)
	}

	got := e.Quiesce(context.Background(), []string{"left", "never-ran"})
	want := []string{"adopted", "left", "never-ran", "started"}
	if len(got) != len(want) {
		t.Fatalf("Quiesce = %+v, want one entry for each of %v", got, want)
	}
	for i, q := range got {
		if q.ID != want[i] || !q.Proven || q.Err != nil || q.Ran != (q.ID != "never-ran") {
			t.Errorf("entry %d = %+v, want %s proven, ran %v", i, q, want[i], q.ID != "never-ran")
		}
	}
	e.mu.Lock()
	_, looked := e.homes["never-ran"]
	e.mu.Unlock()
	if looked {
		t.Error("Quiesce looked up the never-ran home, which has no directory and so no process to stop")
	}
	for name, r := range map[string]provider.Result{"started": started, "adopted": adopted, "left": left} {
		if alive(mustRef(t, r).Identity) {
			t.Errorf("the %s home's process is alive after Quiesce", name)
		}
	}
	r := wake(t, e, provider.Spec{ID: "started", Target: "started"})
	if r.Ref == started.Ref {
		t.Fatalf("wake after Quiesce returned the stopped process %+v", r)
	}
	waitReady(t, r.Endpoint)
}
