package gateway_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// admDeployOptional are metrics the deploy files name that a gateway
// without TLS and with no denial yet does not export.
var admDeployOptional = map[string]string{
	"wakegate_certificate_expiry_days": "exported with TLS on",
	"wakegate_access_denied_total":     "exported from the first denial by an access policy",
}

// admGrafanaVars replaces the dashboard's variables so that its queries
// parse as PromQL.
var admGrafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__range", "1h", "$instance", ".*")

// TestDeployRulesAndDashboard parses deploy/alerts.yml with Prometheus'
// rule parser (every expression and template checked), reads every query
// of deploy/grafana-dashboard.json with the PromQL parser, and checks that
// every metric they name is in a real gateway's /metrics after a wake
// and a suspend.
func TestDeployRulesAndDashboard(t *testing.T) {
	t.Parallel()
	p := parser.NewParser(parser.Options{})
	raw, err := os.ReadFile(filepath.Join("..", "deploy", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	groups, errs := rulefmt.Parse(raw, false, model.UTF8Validation, p, slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatalf("deploy/alerts.yml: %v", errs)
	}
	names := map[string]bool{}
	alerts := map[string]bool{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			alerts[r.Alert] = true
			admMetricNames(t, p, r.Expr, names)
		}
	}
	for _, want := range []string{"WakegateRollIncident", "WakegateRolledBack", "WakegateWakeFailureRatio", "WakegateWakeP99High", "WakegateCertificateExpiry"} {
		if !alerts[want] {
			t.Errorf("alert %s missing", want)
		}
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	raw, err = os.ReadFile(filepath.Join("..", "deploy", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("deploy/grafana-dashboard.json: %v", err)
	}
	for _, pn := range dash.Panels {
		if len(pn.Targets) == 0 {
			t.Errorf("panel %q has no query", pn.Title)
		}
		for _, tg := range pn.Targets {
			admMetricNames(t, p, admGrafanaVars.Replace(tg.Expr), names)
		}
	}

	a := admStart(t, admDemo, "")
	if code, _, body := a.do(t, "POST", "/admin/homes/demo/wake", admToken, nil, nil); code != http.StatusOK {
		t.Fatalf("wake: %d %s", code, body)
	}
	if code, _, body := a.do(t, "POST", "/admin/homes/demo/suspend", admToken, nil, nil); code != http.StatusOK {
		t.Fatalf("suspend: %d %s", code, body)
	}
	code, _, body := a.do(t, "GET", "/metrics", admToken, nil, nil)
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	exported := map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ := strings.Cut(line, "{")
		name, _, _ = strings.Cut(name, " ")
		exported[name] = true
	}
	var sorted []string
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	for _, n := range sorted {
		if !exported[n] && admDeployOptional[n] == "" {
			t.Errorf("the deploy files name %s, which /metrics does not export after a wake and a suspend", n)
		}
	}
	if len(sorted) < 12 {
		t.Errorf("only %d metrics named: %v", len(sorted), sorted)
	}
}

// admMetricNames adds the metric names expr selects to names.
func admMetricNames(t *testing.T, p parser.Parser, expr string, names map[string]bool) {
	t.Helper()
	e, err := p.ParseExpr(expr)
	if err != nil {
		t.Errorf("query %q: %v", expr, err)
		return
	}
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok && vs.Name != "" {
			names[vs.Name] = true
		}
		return nil
	})
}
