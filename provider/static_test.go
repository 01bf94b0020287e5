package provider

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
)

// A static home answering /version with a redirect to an internal
// listener: the version check fails on the redirect and the listener sees
// no request; a version holding terminal escapes is refused and quoted
// escaped only.
func TestStaticVersionFollowsNoRedirect(t *testing.T) {
	internal, hits := testbin.InternalListener(t)
	answer := atomic.Value{}
	answer.Store("redirect")
	home := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch answer.Load() {
		case "redirect":
			http.Redirect(w, r, internal.URL+"/anything", http.StatusFound)
		case "escape":
			fmt.Fprint(w, "v1\x1b]0;TITLE\a")
		default:
			fmt.Fprint(w, "v2\n")
		}
	}))
	t.Cleanup(home.Close)
	s := &Static{Endpoints: map[string]string{"h": home.URL}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	v, err := s.Version(ctx, Spec{ID: "h"})
	if err == nil {
		t.Errorf("a redirected version check answered %q; want an error", v)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the internal listener got %d requests through the home's redirect; want 0", n)
	}
	answer.Store("escape")
	v, err = s.Version(ctx, Spec{ID: "h"})
	if err == nil || strings.ContainsAny(err.Error(), "\x1b\a") || !strings.Contains(err.Error(), `\x1b`) {
		t.Errorf("a version with escapes: %q, %v; want an error quoting it escaped", v, err)
	}
	answer.Store("ok")
	if v, err = s.Version(ctx, Spec{ID: "h"}); err != nil || v != "v2" {
		t.Errorf("a plain version: %q, %v; want v2", v, err)
	}
}
