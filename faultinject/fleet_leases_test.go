package faultinject

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/internal/testbin"
	"github.com/wakegate/wakegate/registry"
	"github.com/wakegate/wakegate/registry/registrytest"
)

// TestFleetLeaseOutlivesItsGateway takes an operator's lease on a home
// through gateway A and kills A: the lease is the fleet's, so B keeps the
// home up (through ten idle ticks past its idle timeout, after A's own
// session report expired), and ending the lease through B lets B suspend
// the home.
func TestFleetLeaseOutlivesItsGateway(t *testing.T) {
	srv := registrytest.StartRedis(t)
	gws := fleetStart(t, srv, 2, fiOptions{wake: map[string]any{"idle_timeout": "1s"}, admin: true})
	a, b := gws[0], gws[1]
	store := openFleetStore(t, srv)
	c := fleetClient()
	for _, g := range gws {
		if res, body, err := g.get(c, fiWhoami); err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("request through %s: %v %s", g.url, err, body)
		}
	}
	var lease struct {
		Lease string `json:"lease"`
	}
	out := a.mustAdmin(t, http.MethodPost, "/admin/homes/"+fiHome+"/leases", `{"ttl":"1h"}`, http.StatusCreated)
	if err := json.Unmarshal([]byte(out), &lease); err != nil || lease.Lease == "" {
		t.Fatalf("lease answer %s: %v", out, err)
	}
	a.kill(t)
	testbin.Eventually(t, "A's session report expires", func() bool {
		reps, err := store.Reports(context.Background())
		return err == nil && !slices.ContainsFunc(reps, func(r registry.InstanceReport) bool { return r.Instance == "gw-0" })
	})
	ticks := b.metric(t, "wakegate_idle_ticks_total")
	testbin.Eventually(t, "ten idle ticks of B", func() bool { return b.metric(t, "wakegate_idle_ticks_total") >= ticks+10 })
	const suspended = "msg=suspend component=wake home=" + fiHome
	if strings.Contains(b.Output(), suspended) {
		t.Fatal("B suspended the home while the lease taken through A was live")
	}
	b.mustAdmin(t, http.MethodDelete, "/admin/homes/"+fiHome+"/leases/"+lease.Lease, "", http.StatusNoContent, http.StatusOK)
	// Longer than Eventually's bound: Redis can stall for seconds on a
	// machine busy with disk work, and B's idle loop waits for it.
	if !testbin.Poll(3*testbin.WaitLimit, 50*time.Millisecond, func() bool { return strings.Contains(b.Output(), suspended) }) {
		t.Fatalf("B did not suspend the home once the lease ended")
	}
	if code, body := b.adminSend(t, http.MethodDelete, "/admin/homes/"+fiHome+"/leases/"+lease.Lease, ""); code != http.StatusNotFound {
		t.Errorf("end the lease again: %d %s, want 404", code, body)
	}
}
