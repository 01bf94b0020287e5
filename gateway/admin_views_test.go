package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/wakegate/wakegate/admin"
	"github.com/wakegate/wakegate/internal/testbin"
)

// admApps lists the apps through the admin API with the query q.
func admApps(t *testing.T, a *admGateway, q string) (int, []admin.AppView) {
	t.Helper()
	code, _, b := a.do(t, "GET", "/admin/apps"+q, admToken, nil, nil)
	if code != http.StatusOK {
		return code, nil
	}
	return code, admDecode[struct {
		Apps []admin.AppView `json:"apps"`
	}](t, b).Apps
}

// Each app's view carries where people open it: public_url and
// /apps/{slug}/ when set, else the public listener's real address.
func TestAdminAppURL(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, extra string
		want        func(a *admGateway) string
	}{
		{"public_url", "public_url: https://gw.example/\n", func(*admGateway) string { return "https://gw.example/apps/demo/" }},
		{"listener", "", func(a *admGateway) string { return "http://" + a.addr + "/apps/demo/" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a := admStart(t, admDemo+c.extra, "")
			_, apps := admApps(t, a, "")
			if len(apps) != 1 || apps[0].URL != c.want(a) {
				t.Fatalf("apps %+v; want demo at %s", apps, c.want(a))
			}
		})
	}
}

// ?phase= lists the apps in that phase only; an unknown phase is refused
// with 400 naming the parameter.
func TestAdminAppPhaseFilter(t *testing.T) {
	t.Parallel()
	a := admStart(t, admDemo, "")
	var phase string
	testbin.Eventually(t, "the demo app observed", func() bool {
		_, apps := admApps(t, a, "")
		phase = apps[0].Phase
		return phase != "unknown"
	})
	if _, apps := admApps(t, a, "?phase="+phase); len(apps) != 1 || apps[0].Slug != "demo" {
		t.Errorf("?phase=%s: %+v; want the demo app", phase, apps)
	}
	other := map[bool]string{true: "stopped", false: "ready"}[phase == "ready"]
	if code, apps := admApps(t, a, "?phase="+other); code != http.StatusOK || len(apps) != 0 {
		t.Errorf("?phase=%s: %d %+v; want none", other, code, apps)
	}
	code, _, b := a.do(t, "GET", "/admin/apps?phase=sleepy", admToken, nil, nil)
	if e := admDecode[admErr](t, b); code != http.StatusBadRequest || e.Error.Field != "phase" || !strings.Contains(e.Error.Message, "sleepy") {
		t.Errorf("?phase=sleepy: %d %s; want 400 naming the field phase", code, b)
	}
}

// GET /admin/access/denials lists the last refusals newest first, with the
// policy's reason for operators, and counts them by policy and code.
func TestAdminAccessDenials(t *testing.T) {
	t.Parallel()
	a := admStart(t, admDemo+acJWTPolicy, "")
	c := e2eClient(t)
	url := "http://" + a.addr + "/node/demo/whoami"
	e2eGet(t, c, url, nil)
	e2eGet(t, c, url, nil)
	e2eGet(t, c, url, http.Header{"Authorization": {"Bearer " + acToken(t, "bob", time.Hour)}, "X-Request-Id": {"caller-id"}})
	code, _, b := a.do(t, "GET", "/admin/access/denials", admToken, nil, nil)
	if code != http.StatusOK {
		t.Fatalf("denials: %d %s", code, b)
	}
	d := admDecode[admin.DenialLog](t, b)
	if len(d.Recent) != 3 {
		t.Fatalf("recent %+v; want 3 refusals", d.Recent)
	}
	newest := d.Recent[0]
	if newest.Code != "token_not_for_home" || newest.Status != http.StatusForbidden || newest.Route != "node/demo" ||
		newest.Policy != "users" || !strings.Contains(newest.Reason, "bob") || newest.Client != "127.0.0.1" || newest.RequestID == "" {
		t.Errorf("newest refusal %+v; want the 403 for bob's token with its reason", newest)
	}
	want := []admin.DenialCount{{Policy: "users", Code: "token_missing", Count: 2}, {Policy: "users", Code: "token_not_for_home", Count: 1}}
	if fmt.Sprint(d.Counts) != fmt.Sprint(want) {
		t.Errorf("counts %+v; want %+v", d.Counts, want)
	}
	code, _, b = a.do(t, "GET", "/admin/fleet", admToken, nil, nil)
	if f := admDecode[admin.FleetView](t, b); code != http.StatusOK || f.Fleet || f.Instances == nil || len(f.Instances) != 0 {
		t.Errorf("fleet of a gateway on its own store: %d %s; want fleet false and no instances", code, b)
	}
}

// The dashboard links each app to where people open it, filters apps by
// phase, and shows access refusals.
func TestDashboardAppLinkPhaseFilterDenials(t *testing.T) {
	t.Parallel()
	a := admStart(t, admDemo+acJWTPolicy+"public_url: https://gw.example\n", "")
	e2eGet(t, e2eClient(t), "http://"+a.addr+"/node/demo/whoami", nil)
	ctx := admBrowser(t)
	err := admLogin(ctx, a, `tr[data-app="demo"]`)
	var href, label string
	if err == nil {
		err = chromedp.Do(ctx,
			admPoll(`!!document.querySelector('a[data-open-app="demo"]')`),
			admPoll(`document.querySelector('#denials tbody').textContent.indexOf("token_missing") >= 0`),
		)
	}
	if err == nil {
		href, err = chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('a[data-open-app="demo"]').href`))
	}
	if err == nil {
		label, err = chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('a[data-open-app="demo"]').getAttribute("aria-label")`))
	}
	if err == nil {
		// The demo app is never stopped here: that filter empties the table,
		// and "any phase" brings it back.
		err = chromedp.Do(ctx,
			chromedp.SetValue(chromedp.CSS(`#app-phase`), "stopped"),
			chromedp.Evaluate[chromedp.Void](`document.getElementById("app-phase").dispatchEvent(new Event("change"))`),
			admPoll(`!document.querySelector('tr[data-app="demo"]') && document.querySelector('#apps tbody').textContent === "No app is stopped."`),
			chromedp.SetValue(chromedp.CSS(`#app-phase`), ""),
			chromedp.Evaluate[chromedp.Void](`document.getElementById("app-phase").dispatchEvent(new Event("change"))`),
			admPoll(`!!document.querySelector('tr[data-app="demo"]')`),
		)
	}
	admScreenshot(t, ctx, "dashboard-views.png")
	if err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	if href != "https://gw.example/apps/demo/" || label != "Open app demo in a new tab" {
		t.Errorf("app link %q labelled %q; want https://gw.example/apps/demo/ with a name", href, label)
	}
}

// A config file without admin.tokens takes the token in WAKEGATE_TOKEN,
// as the CLI does: the admin listener is on with it.
func TestAdminTokenFromEnvironment(t *testing.T) {
	const tok = "env-token-0123456789abcdef"
	t.Setenv("WAKEGATE_TOKEN", tok)
	// Any free port: a gateway run by hand beside the tests may hold the
	// default one.
	gw := e2eStartInProcess(t, admDemo+"admin:\n  listen: 127.0.0.1:0\n")
	ctx, cancel := context.WithTimeout(context.Background(), testbin.WaitLimit)
	defer cancel()
	addr, err := gw.g.AdminAddr(ctx)
	if err != nil {
		t.Fatalf("admin listener: %v", err)
	}
	for token, want := range map[string]int{tok: http.StatusOK, "another-token-0123456789": http.StatusUnauthorized} {
		req, _ := http.NewRequest("GET", "http://"+addr.String()+"/admin/status", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := e2eClient(t).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("token %q: %d; want %d", token, res.StatusCode, want)
		}
	}
}
