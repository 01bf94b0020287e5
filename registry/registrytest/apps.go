package registrytest

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/wakegate/wakegate/registry"
)

// sampleApp returns an app with every field set.
func sampleApp(slug string) registry.App {
	return registry.App{
		Slug: slug, Home: "h1", Kind: "api", StripPrefix: true, Path: "/base",
		Health:       registry.AppHealth{Type: "http", Path: "/healthz", Interval: registry.Duration(2 * time.Second), Timeout: registry.Duration(time.Second), StartPeriod: registry.Duration(5 * time.Second)},
		DesiredState: "running", FailureThreshold: 3, MinRefresh: registry.Duration(time.Second), RefreshTimeout: registry.Duration(30 * time.Second),
		UpdatedAt: time.Date(2029, 12, 31, 23, 0, 0, 123456789, time.UTC), Owner: "gw-a",
	}
}

// sameApp reports how a and b differ ("" when equal; times as instants).
func sameApp(a, b registry.App) string {
	if !a.UpdatedAt.Equal(b.UpdatedAt) {
		return "updated_at differs: " + a.UpdatedAt.String() + " vs " + b.UpdatedAt.String()
	}
	a.UpdatedAt, b.UpdatedAt = time.Time{}, time.Time{}
	if !reflect.DeepEqual(a, b) {
		return "records differ"
	}
	return ""
}

func testAppCreateAndGet(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	_, err := s.GetApp(ctx, "a1")
	WantErr(t, "get missing app", err, registry.ErrNotFound)
	in := sampleApp("a1")
	in.Generation = 42 // ignored: the store sets it
	stored, err := s.PutApp(ctx, in, registry.Cond{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if stored.Generation != 1 || stored.Owner != "gw-a" {
		t.Fatalf("created generation %d owner %q, want 1 and gw-a", stored.Generation, stored.Owner)
	}
	got, err := s.GetApp(ctx, "a1")
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	want := sampleApp("a1")
	want.Generation = 1
	if d := sameApp(got, want); d != "" {
		t.Fatalf("read back: %s: %+v vs %+v", d, got, want)
	}
	if _, err := s.PutApp(ctx, registry.App{}, registry.Cond{}); err == nil || errors.Is(err, registry.ErrConflict) {
		t.Fatalf("app without slug: %v, want a validation error", err)
	}
	_, err = s.PutApp(ctx, sampleApp("a1"), registry.Cond{})
	WantErr(t, "create on existing app", err, registry.ErrConflict)
}

func testAppCAS(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	v1, err := s.PutApp(ctx, sampleApp("a1"), registry.Cond{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	next := v1
	next.Kind, next.Owner = "ui", "gw-b"
	v2, err := s.PutApp(ctx, next, registry.AppCond(v1))
	if err != nil || v2.Generation != 2 || v2.Owner != "gw-b" || v2.Kind != "ui" {
		t.Fatalf("update: %+v, %v", v2, err)
	}
	// The stale writer (v1) and a writer with the wrong owner are refused.
	_, err = s.PutApp(ctx, v1, registry.AppCond(v1))
	WantErr(t, "stale generation", err, registry.ErrConflict)
	_, err = s.PutApp(ctx, v1, registry.Cond{Generation: v2.Generation, Owner: "gw-a"})
	WantErr(t, "wrong owner", err, registry.ErrConflict)
	_, err = s.PutApp(ctx, sampleApp("missing"), registry.Cond{Generation: 1, Owner: "gw-a"})
	WantErr(t, "update of a missing app", err, registry.ErrNotFound)
	got, err := s.GetApp(ctx, "a1")
	if err != nil || got.Generation != 2 || got.Kind != "ui" {
		t.Fatalf("after refused writes: %+v, %v", got, err)
	}
}

func testAppListAndDelete(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	apps, err := s.ListApps(ctx)
	if err != nil || len(apps) != 0 || apps == nil {
		t.Fatalf("empty list: %#v, %v; want an empty non-nil list", apps, err)
	}
	var v1 registry.App
	for _, slug := range []string{"c", "a", "b"} {
		a, err := s.PutApp(ctx, sampleApp(slug), registry.Cond{})
		if err != nil {
			t.Fatalf("create %s: %v", slug, err)
		}
		if slug == "a" {
			v1 = a
		}
	}
	apps, err = s.ListApps(ctx)
	if err != nil || len(apps) != 3 || apps[0].Slug != "a" || apps[1].Slug != "b" || apps[2].Slug != "c" {
		t.Fatalf("list: %+v, %v; want a, b, c", apps, err)
	}
	WantErr(t, "delete with wrong generation", s.DeleteApp(ctx, "a", registry.Cond{Generation: 2, Owner: "gw-a"}), registry.ErrConflict)
	WantErr(t, "delete with wrong owner", s.DeleteApp(ctx, "a", registry.Cond{Generation: 1, Owner: "gw-b"}), registry.ErrConflict)
	WantErr(t, "delete with create condition", s.DeleteApp(ctx, "a", registry.Cond{}), registry.ErrConflict)
	if err := s.DeleteApp(ctx, "a", registry.AppCond(v1)); err != nil {
		t.Fatalf("delete: %v", err)
	}
	_, err = s.GetApp(ctx, "a")
	WantErr(t, "get deleted app", err, registry.ErrNotFound)
	WantErr(t, "delete twice", s.DeleteApp(ctx, "a", registry.AppCond(v1)), registry.ErrNotFound)
	// Apps and homes are separate: a home with the same name is unaffected.
	mustCreateHome(t, s, SampleHome("b"))
	if err := s.DeleteApp(ctx, "b", registry.Cond{Generation: 1, Owner: "gw-a"}); err != nil {
		t.Fatalf("delete app b: %v", err)
	}
	if _, err := s.GetHome(ctx, "b"); err != nil {
		t.Fatalf("home b after deleting app b: %v", err)
	}
	again, err := s.PutApp(ctx, sampleApp("a"), registry.Cond{})
	if err != nil || again.Generation != 1 {
		t.Fatalf("re-create deleted app: %+v, %v", again, err)
	}
}

func testAppCancelledContext(t *testing.T, open Opener) {
	s, _ := open(t)
	live := context.Background()
	v1, err := s.PutApp(live, sampleApp("a1"), registry.Cond{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	ctx, cancel := context.WithCancel(live)
	cancel()
	check := func(call string, err error) { t.Helper(); wantCancelled(t, call, err) }
	_, err = s.GetApp(ctx, "a1")
	check("GetApp", err)
	_, err = s.ListApps(ctx)
	check("ListApps", err)
	_, err = s.PutApp(ctx, sampleApp("a2"), registry.Cond{})
	check("PutApp", err)
	check("DeleteApp", s.DeleteApp(ctx, "a1", registry.AppCond(v1)))
	if _, err := s.GetApp(live, "a2"); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("app created with a cancelled context: %v", err)
	}
	if _, err := s.GetApp(live, "a1"); err != nil {
		t.Fatalf("app deleted with a cancelled context: %v", err)
	}
}

// testAppStateCAS: an app's desired state is stored and read back, written
// with compare-and-set, listed by slug, announced on its key and on
// AnyAppKey, and refused when it is neither running nor stopped.
func testAppStateCAS(t *testing.T, open Opener) {
	s, _ := open(t)
	ctx := context.Background()
	_, err := s.GetAppState(ctx, "b1")
	WantErr(t, "get missing app state", err, registry.ErrNotFound)
	own, any := s.Changed(registry.AppStateKey("b1")), s.Changed(registry.AnyAppKey)
	st, err := s.PutAppState(ctx, registry.AppState{Slug: "b1", DesiredState: registry.AppStopped, Owner: "gw-a"}, registry.Cond{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if st.Generation != 1 {
		t.Fatalf("created generation %d, want 1", st.Generation)
	}
	for name, ch := range map[string]<-chan struct{}{"its key": own, "AnyAppKey": any} {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("the write was not announced on %s", name)
		}
	}
	got, err := s.GetAppState(ctx, "b1")
	if err != nil || !got.Stopped() || got.Generation != 1 || got.Owner != "gw-a" {
		t.Fatalf("read back %+v, %v", got, err)
	}
	_, err = s.PutAppState(ctx, registry.AppState{Slug: "b1", DesiredState: registry.AppRunning}, registry.Cond{})
	WantErr(t, "create over an existing state", err, registry.ErrConflict)
	if _, err := s.PutAppState(ctx, registry.AppState{Slug: "b1", DesiredState: registry.AppRunning, Owner: "gw-b"}, registry.AppStateCond(got)); err != nil {
		t.Fatalf("replace: %v", err)
	}
	if _, err := s.PutAppState(ctx, registry.AppState{Slug: "a0", DesiredState: registry.AppStopped}, registry.Cond{}); err != nil {
		t.Fatalf("create a0: %v", err)
	}
	all, err := s.ListAppStates(ctx)
	if err != nil || len(all) != 2 || all[0].Slug != "a0" || all[1].Slug != "b1" || all[1].Stopped() {
		t.Fatalf("list = %+v, %v; want a0 (stopped) then b1 (running)", all, err)
	}
	if _, err := s.PutAppState(ctx, registry.AppState{Slug: "c1", DesiredState: "paused"}, registry.Cond{}); err == nil {
		t.Fatal("a desired state of \"paused\" was stored")
	}
}
