package docker_test

import (
	"net/http"
	"net/http/httptrace"
	"os"
	"slices"
	"testing"
	"time"
)

// TestColdWakeTiming measures, when WAKEGATE_DOCKER_TIMING=1, the cold
// wake of the demo home as a container beside the same home as an exec
// process: ten times each, from the request to the first byte of the
// answer, after an operator's suspend. It asserts nothing about time; it
// logs the medians (go test -v).
func TestColdWakeTiming(t *testing.T) {
	if os.Getenv("WAKEGATE_DOCKER_TIMING") != "1" {
		t.Skip("a measurement, not a test: set WAKEGATE_DOCKER_TIMING=1 and run with -v")
	}
	homes := "  - {id: d1, provider: docker, version: \"1\", idle_timeout: 0s}\n" +
		"  - {id: e1, version: \"1\", idle_timeout: 0s}\n"
	r := newRig(t)
	r.serve(t, r.config("", "", homes))
	r.measure(t, "suspend: stop", "d1", "e1")
	r.gw.Stop()
	p := newRig(t)
	p.serve(t, p.config("    suspend: pause\n", "", homes))
	p.measure(t, "suspend: pause", "d1")
}

// measure logs the first wake of the first home and the median cold wake
// of each.
func (r *rig) measure(t *testing.T, mode string, ids ...string) {
	c := &http.Client{Timeout: 40 * time.Second}
	firstByte := func(path string) time.Duration {
		t.Helper()
		var start time.Time
		var took time.Duration
		tr := &httptrace.ClientTrace{GotFirstResponseByte: func() { took = time.Since(start) }}
		req, _ := http.NewRequest("GET", "http://"+r.gw.Addr+path, nil)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), tr))
		start = time.Now()
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", path, res.StatusCode)
		}
		return took
	}
	t.Logf("%s: first wake (create and start): %s", ids[0], firstByte("/node/"+ids[0]+"/"))
	for _, id := range ids {
		var ds []time.Duration
		for range 10 {
			if code, body := r.adm(t, "POST", "/admin/homes/"+id+"/suspend", nil, nil); code != http.StatusOK {
				t.Fatalf("suspend %s: %d %s", id, code, body)
			}
			ds = append(ds, firstByte("/node/"+id+"/"))
		}
		slices.Sort(ds)
		t.Logf("%s (%s): cold wake to first byte, median of 10: %s (min %s, max %s)", id, mode, (ds[4]+ds[5])/2, ds[0], ds[9])
	}
}
