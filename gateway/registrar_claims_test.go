package gateway_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/wakegate/wakegate/internal/testbin"
)

// claimRounds is how many rounds of concurrent claims of one target
// TestRegistrarTargetClaimsAtomic runs.
const claimRounds = 30

// TestRegistrarTargetClaimsAtomic races four homes for one target through
// the admin API of the real binary, round after round: exactly one PUT
// wins each round, the others get 409 target_taken naming the field and,
// in the cause, the winner. A restart on the same data dir serves exactly
// the winners. A config that then declares one of the targets takes it,
// and the log says which API home lost its route and what to do; removing
// a home frees its target for another.
func TestRegistrarTargetClaimsAtomic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	adminAddr := fmt.Sprintf("127.0.0.1:%d", testbin.FreePort(t))
	base := fmt.Sprintf(`listen: "%%ADDR%%"
data_dir: "%%DATA%%"
log: {access: false}
wake:
  idle_timeout: 0s
exec:
  command: ["/bin/true", "{port}"]
admin:
  listen: %q
  tokens: [%q]
`, adminAddr, admToken)
	adm := &admGateway{admin: "http://" + adminAddr, client: e2eClient(t)}

	p1 := testbin.ServeIn(t, dir, base)
	winners := make([]string, claimRounds)
	for round := range claimRounds {
		winners[round] = claimRace(t, adm, round)
	}
	p1.Stop()

	p2 := testbin.ServeIn(t, dir, base)
	served := claimServed(t, adm)
	for round, w := range winners {
		target := fmt.Sprintf("t%d", round)
		if served[target] != w {
			t.Errorf("after a restart, target %s routes home %q; the winner was %s", target, served[target], w)
		}
	}
	if n := len(served); n != claimRounds {
		t.Errorf("after a restart, %d homes are served, want the %d winners: %v", n, claimRounds, served)
	}
	if strings.Contains(p2.Output(), "not restored") {
		t.Errorf("a restart after the races skipped stored homes:\n%s", p2.Output())
	}
	p2.Stop()

	// The config takes t0: the API home that held it loses its route.
	p3 := testbin.ServeIn(t, dir, base+"homes:\n  - id: cfg\n    target: t0\n")
	served = claimServed(t, adm)
	if served["t0"] != "cfg" {
		t.Errorf("with the config declaring t0, it routes %q", served["t0"])
	}
	lines := strings.Split(p3.Output(), "\n")
	if !containsAll(lines, "home="+winners[0], "target=t0", "cfg", "PUT /admin/homes/"+winners[0]) {
		t.Errorf("no log line names the API home that lost t0 to the config and what to do:\n%s", p3.Output())
	}
	code, _, body := adm.do(t, "PUT", "/admin/homes/late", admToken, nil, map[string]any{"target": "t0"})
	if e := admDecode[admFullErr](t, body).Error; code != http.StatusConflict || e.Code != "target_taken" ||
		e.Field != "target" || !strings.Contains(e.Cause, `"cfg"`) {
		t.Errorf("PUT on the config's target: %d %s", code, body)
	}

	// Removing a home releases its target.
	if code, _, body := adm.do(t, "DELETE", "/admin/homes/"+winners[1], admToken, nil, nil); code != http.StatusNoContent {
		t.Fatalf("remove %s: %d %s", winners[1], code, body)
	}
	if code, _, body := adm.do(t, "PUT", "/admin/homes/late", admToken, nil, map[string]any{"target": "t1"}); code != http.StatusCreated {
		t.Errorf("PUT on a released target: %d %s", code, body)
	}
}

// claimRace sends four concurrent PUTs of new homes claiming target
// t{round} and returns the one that won.
func claimRace(t *testing.T, adm *admGateway, round int) string {
	t.Helper()
	target := fmt.Sprintf("t%d", round)
	type answer struct {
		id   string
		code int
		err  admFullErr
	}
	answers := make([]answer, 4)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range answers {
		id := fmt.Sprintf("r%dh%d", round, i)
		wg.Go(func() {
			<-start
			code, _, body := adm.do(t, "PUT", "/admin/homes/"+id, admToken, nil, map[string]any{"target": target})
			answers[i] = answer{id: id, code: code}
			if code >= 300 {
				answers[i].err = admDecode[admFullErr](t, body)
			}
		})
	}
	close(start)
	wg.Wait()
	var won []string
	for _, a := range answers {
		if a.code < 300 {
			won = append(won, a.id)
		}
	}
	if len(won) != 1 {
		t.Fatalf("round %d: %d PUTs won target %s, want 1: %+v", round, len(won), target, answers)
	}
	for _, a := range answers {
		if a.id == won[0] {
			continue
		}
		if e := a.err.Error; a.code != http.StatusConflict || e.Code != "target_taken" || e.Field != "target" ||
			!strings.Contains(e.Cause, `"`+won[0]+`"`) {
			t.Errorf("round %d: loser %s: %d %+v; want 409 target_taken naming %s", round, a.id, a.code, e, won[0])
		}
	}
	return won[0]
}

// claimServed returns the home served at each target.
func claimServed(t *testing.T, adm *admGateway) map[string]string {
	t.Helper()
	code, _, body := adm.do(t, "GET", "/admin/homes", admToken, nil, nil)
	if code != http.StatusOK {
		t.Fatalf("list homes: %d %s", code, body)
	}
	served := map[string]string{}
	for _, h := range admDecode[struct{ Homes []admHome }](t, body).Homes {
		if prev, ok := served[h.Target]; ok {
			t.Errorf("target %s routes two homes: %s and %s", h.Target, prev, h.ID)
		}
		served[h.Target] = h.ID
	}
	return served
}
