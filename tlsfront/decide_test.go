package tlsfront

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

func TestDecide(t *testing.T) {
	t.Parallel()
	known := map[string]bool{"demo.apps.test": true}
	d := NewDecider(DecisionOptions{Known: func(h string) bool { return known[h] }, Allow: []string{"Extra.Example.com"},
		CacheSize: 100, CacheTTL: time.Hour, Rate: rate.Inf, Burst: 1})
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"demo.apps.test", true},
		{"DEMO.apps.test.", true},
		{"extra.example.com", true},
		{"nope.apps.test", false},
		{"", false},
		{"127.0.0.1", false},
		{"::1", false},
		{"[::1]", false},
		{"localhost", false},
		{"-bad.apps.test", false},
		{"a_b.apps.test", false},
		{"*.apps.test", false},
	} {
		err := d.Decide(context.Background(), c.name)
		if (err == nil) != c.ok {
			t.Errorf("Decide(%q) = %v, want allowed %v", c.name, err, c.ok)
		}
	}
}

// TestDecideCachesBothWays asks the lookup once per name while cached,
// positive or negative.
func TestDecideCachesBothWays(t *testing.T) {
	t.Parallel()
	asked := map[string]int{}
	d := NewDecider(DecisionOptions{Known: func(h string) bool { asked[h]++; return h == "a.test" },
		CacheSize: 10, CacheTTL: time.Hour, Rate: rate.Inf, Burst: 1})
	for range 5 {
		_ = d.Decide(context.Background(), "a.test")
		_ = d.Decide(context.Background(), "b.test")
	}
	if asked["a.test"] != 1 || asked["b.test"] != 1 {
		t.Fatalf("lookups %v, want one per name", asked)
	}
	d.Forget()
	_ = d.Decide(context.Background(), "b.test")
	if asked["b.test"] != 2 {
		t.Fatalf("after Forget: %d lookups of b.test, want 2", asked["b.test"])
	}
}

// TestDecideCacheBounded keeps the cache under its size whatever the
// number of names.
func TestDecideCacheBounded(t *testing.T) {
	t.Parallel()
	d := NewDecider(DecisionOptions{CacheSize: 64, CacheTTL: time.Hour, Rate: rate.Inf, Burst: 1})
	for i := range 10000 {
		_ = d.Decide(context.Background(), fmt.Sprintf("n%d.test", i))
	}
	if n := len(d.cache); n > 64 {
		t.Fatalf("cache holds %d decisions, bound 64", n)
	}
}

// TestDecideRateLimited refuses new allowed names past the burst, without
// caching the refusal.
func TestDecideRateLimited(t *testing.T) {
	t.Parallel()
	d := NewDecider(DecisionOptions{Known: func(string) bool { return true },
		CacheSize: 100, CacheTTL: time.Hour, Rate: rate.Every(time.Hour), Burst: 2})
	for i, want := range []error{nil, nil, ErrRateLimited, ErrRateLimited} {
		if err := d.Decide(context.Background(), fmt.Sprintf("n%d.test", i)); !errors.Is(err, want) && err != want {
			t.Errorf("name %d: %v, want %v", i, err, want)
		}
	}
	// Already allowed names stay allowed from the cache.
	if err := d.Decide(context.Background(), "n0.test"); err != nil {
		t.Errorf("cached allowed name: %v", err)
	}
	if _, cached := d.cache["n2.test"]; cached {
		t.Error("a rate-limited refusal was cached")
	}
}

func TestRequestHost(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{"Demo.Test", "demo.test", true},
		{"demo.test:8443", "demo.test", true},
		{"demo.test.", "demo.test", true},
		{"demo.test:x", "", false},
		{"127.0.0.1:80", "", false},
		{"[::1]:443", "", false},
		{"user@demo.test", "", false},
		{"demo.test/evil", "", false},
		{"", "", false},
	} {
		got, ok := RequestHost(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("RequestHost(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// TestDecideReasons tells OnRefuse why each refusal happened.
func TestDecideReasons(t *testing.T) {
	t.Parallel()
	var got []string
	d := NewDecider(DecisionOptions{Known: func(h string) bool { return h == "a.test" || h == "b.test" },
		CacheSize: 10, CacheTTL: time.Hour, Rate: rate.Every(time.Hour), Burst: 1,
		OnRefuse: func(r string) { got = append(got, r) }})
	for _, n := range []string{"a.test", "b.test", "c.test", "c.test", "10.0.0.1", ""} {
		_ = d.Decide(context.Background(), n)
	}
	want := []string{ReasonRateLimited, ReasonNotAllowed, ReasonNotAllowed, ReasonNotAHost, ReasonNotAHost}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("reasons %v, want %v", got, want)
	}
}
