package faultinject

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// Admin races and loose JSON: concurrent claims of one target through the
// admin API, restarts, the config taking a target, and bodies that a
// lenient decoder would have read.

// claimRounds is how many rounds of four concurrent claims of one target
// TestAdminTargetClaimRace runs.
const claimRounds = 30

// fiAdminErr is the admin API's error body.
type fiAdminErr struct {
	Error struct {
		Code  string `json:"code"`
		Field string `json:"field"`
		Cause string `json:"cause"`
		Hint  string `json:"hint"`
	} `json:"error"`
}

// TestAdminTargetClaimRace races four new homes for one target through
// the admin API, round after round: exactly one PUT wins each round, the
// others get 409 target_taken naming the field and, in the cause, the
// winner. A restart on the same data serves exactly the winners; a config
// that then declares one of the targets takes it, and the log names the
// API home that lost its route and what to do; removing a home frees its
// target for another.
func TestAdminTargetClaimRace(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	g := fiStart(t, dir, fiConfig(t, fiOptions{admin: true}))
	winners := make([]string, claimRounds)
	for round := range claimRounds {
		winners[round] = claimRace(t, g, round)
	}
	g.stop(t)

	g.start(t)
	served := claimServed(t, g)
	for round, w := range winners {
		if target := fmt.Sprintf("t%d", round); served[target] != w {
			t.Errorf("after a restart, target %s routes home %q; the winner was %s", target, served[target], w)
		}
	}
	if n := len(served); n != claimRounds+1 {
		t.Errorf("after a restart, %d homes are served, want the %d winners and %s: %v", n, claimRounds, fiHome, served)
	}
	if strings.Contains(g.Output(), "not restored") {
		t.Errorf("a restart after the races skipped stored homes:\n%s", g.Output())
	}
	g.stop(t)

	// The config takes t0: the API home that held it loses its route.
	g = fiStart(t, dir, fiConfig(t, fiOptions{admin: true, home: map[string]any{"id": "cfg", "target": "t0"}}))
	if served = claimServed(t, g); served["t0"] != "cfg" {
		t.Errorf("with the config declaring t0, it routes %q", served["t0"])
	}
	if !logLine(g.Output(), "home="+winners[0], "target=t0", "config_home=cfg", "PUT /admin/homes/"+winners[0]) {
		t.Errorf("no log line names the API home that lost t0 to the config and what to do:\n%s", g.Output())
	}
	code, e := fiAdminPut(t, g, "/admin/homes/late", `{"target":"t0"}`)
	if code != http.StatusConflict || e.Error.Code != "target_taken" || e.Error.Field != "target" || !strings.Contains(e.Error.Cause, `"cfg"`) {
		t.Errorf("PUT on the config's target: %d %+v", code, e)
	}
	if code, body := g.adminDo(t, "DELETE", "/admin/homes/"+winners[1]); code != http.StatusNoContent {
		t.Fatalf("remove %s: %d %s", winners[1], code, body)
	}
	if code, e := fiAdminPut(t, g, "/admin/homes/late", `{"target":"t1"}`); code != http.StatusCreated {
		t.Errorf("PUT on a released target: %d %+v", code, e)
	}
}

// claimRace sends four concurrent PUTs of new homes claiming target
// t{round} and returns the one that won.
func claimRace(t *testing.T, g *fiGateway, round int) string {
	t.Helper()
	type answer struct {
		id   string
		code int
		err  fiAdminErr
	}
	target := fmt.Sprintf("t%d", round)
	answers := make([]answer, 4)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range answers {
		id := fmt.Sprintf("r%dh%d", round, i)
		wg.Go(func() {
			<-start
			code, e := fiAdminPut(t, g, "/admin/homes/"+id, `{"target":"`+target+`","idle_timeout":"0s"}`)
			answers[i] = answer{id: id, code: code, err: e}
		})
	}
	close(start)
	wg.Wait()
	var won []string
	for _, a := range answers {
		if a.code/100 == 2 {
			won = append(won, a.id)
		}
	}
	if len(won) != 1 {
		t.Fatalf("round %d: %d PUTs won target %s, want 1: %+v", round, len(won), target, answers)
	}
	for _, a := range answers {
		if e := a.err.Error; a.id != won[0] && (a.code != http.StatusConflict || e.Code != "target_taken" ||
			e.Field != "target" || !strings.Contains(e.Cause, `"`+won[0]+`"`)) {
			t.Errorf("round %d: loser %s: %d %+v; want 409 target_taken naming %s", round, a.id, a.code, e, won[0])
		}
	}
	return won[0]
}

// TestAdminLooseJSONRefused sends the bodies a lenient decoder accepts to
// the real binary: each is a 400 naming the key or the body, and nothing
// is registered.
func TestAdminLooseJSONRefused(t *testing.T) {
	t.Parallel()
	g := fiStart(t, t.TempDir(), fiConfig(t, fiOptions{admin: true}))
	for _, c := range []struct{ body, field string }{
		{`{"target":"x1"} {"evil":1}`, "body"},
		{`{"Target":"x1"}`, "Target"},
		{`{"target":"x1","target":"x2"}`, "target"},
		{`null`, "body"},
		{`{"target":"x1","evil":1}`, "evil"},
	} {
		code, e := fiAdminPut(t, g, "/admin/homes/x1", c.body)
		if code != http.StatusBadRequest || e.Error.Field != c.field {
			t.Errorf("PUT %s: %d %+v; want 400 naming %q", c.body, code, e, c.field)
		}
	}
	if code, body := g.adminDo(t, "GET", "/admin/homes/x1"); code != http.StatusNotFound {
		t.Errorf("a refused body registered a home: %d %s", code, body)
	}
}

// fiAdminPut sends PUT path with body (raw JSON, sent as it is) to g's
// admin API and returns the status and, for an error, its body.
func fiAdminPut(t *testing.T, g *fiGateway, path, body string) (int, fiAdminErr) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, g.admin+path, strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return 0, fiAdminErr{}
	}
	req.Header.Set("Authorization", "Bearer "+fiToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("PUT %s: %v", path, err)
		return 0, fiAdminErr{}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Errorf("PUT %s: read: %v", path, err)
	}
	var e fiAdminErr
	if res.StatusCode >= 300 {
		if err := json.Unmarshal(b, &e); err != nil {
			t.Errorf("PUT %s: %d %s: %v", path, res.StatusCode, b, err)
		}
	}
	return res.StatusCode, e
}

// claimServed returns the home served at each target.
func claimServed(t *testing.T, g *fiGateway) map[string]string {
	t.Helper()
	code, body := g.adminDo(t, "GET", "/admin/homes")
	if code != http.StatusOK {
		t.Fatalf("list homes: %d %s", code, body)
	}
	var list struct {
		Homes []struct{ ID, Target string }
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatalf("list homes: %v: %s", err, body)
	}
	served := map[string]string{}
	for _, h := range list.Homes {
		if prev, ok := served[h.Target]; ok {
			t.Errorf("target %s routes two homes: %s and %s", h.Target, prev, h.ID)
		}
		served[h.Target] = h.ID
	}
	return served
}

// logLine reports whether one line of out contains every one of parts.
func logLine(out string, parts ...string) bool {
	for l := range strings.SplitSeq(out, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			return true
		}
	}
	return false
}
