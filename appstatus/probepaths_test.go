package appstatus

import (
	"slices"
	"testing"

	"github.com/wakegate/wakegate/probe"
	"github.com/wakegate/wakegate/registry"
)

// TestHomeProbePaths: an auto probe of a home tries each of its apps where
// the app's direct health check asks: with strip_prefix at its base path
// and health path, without it under /apps/{slug} and, for an app that was
// not told its prefix, at its base path too; tcp-checked apps and other
// homes' apps add nothing, and a path two apps share is tried once.
func TestHomeProbePaths(t *testing.T) {
	a := New(Options{})
	defer a.Close()
	http := func(p string) registry.AppHealth { return registry.AppHealth{Type: registry.HealthHTTP, Path: p} }
	for _, s := range []registry.App{
		{Slug: "a", Home: "h", Kind: "api", StripPrefix: true, Path: "/base", Health: http("/healthz")},
		{Slug: "b", Home: "h", Kind: "ui", Health: http("/")},
		{Slug: "c", Home: "h", Kind: "ui", Health: registry.AppHealth{Type: registry.HealthTCP, Path: "/"}},
		{Slug: "d", Home: "other", Kind: "ui", Health: http("/")},
		{Slug: "e", Home: "h", Kind: "ui", StripPrefix: true, Health: http("/")},
	} {
		a.Put(s)
	}
	got := a.HomeProbePaths("h")
	want := []probe.Path{{Path: "/base/healthz", API: true}, {Path: "/apps/b/"}, {Path: "/"}}
	if !slices.Equal(got, want) {
		t.Fatalf("probe paths %+v, want %+v", got, want)
	}
}
