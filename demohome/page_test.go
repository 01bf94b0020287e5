package demohome

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestPageSaysWhatHappened: the page says it was served through wakegate
// (the request carries the gateway's X-Forwarded-Proto), that the first
// page after a start was most likely what woke the home, how many pages
// came later, and reads the gateway's Server-Timing wake entry.
func TestPageSaysWhatHappened(t *testing.T) {
	srv := httptest.NewServer(NewHandler(Options{Target: "demo"}))
	defer srv.Close()
	get := func(forwarded bool) string {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/node/demo/", nil)
		if forwarded {
			req.Header.Set("X-Forwarded-Proto", "http")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	cases := []struct {
		forwarded bool
		want, not []string
	}{
		{true, []string{"Served through wakegate.", "This is the first page this home has served", "most likely for this request", `"wake"`}, nil},
		{true, []string{"Served through wakegate.", "has served 2 pages"}, []string{"first page"}},
		{false, []string{"has served 3 pages"}, []string{"Served through wakegate"}},
	}
	for i, c := range cases {
		body := get(c.forwarded)
		for _, w := range c.want {
			if !strings.Contains(body, w) {
				t.Errorf("page %d lacks %q:\n%s", i+1, w, body)
			}
		}
		for _, w := range c.not {
			if strings.Contains(body, w) {
				t.Errorf("page %d has %q", i+1, w)
			}
		}
	}
}
