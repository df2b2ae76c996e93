package envtest

// The chart's Grafana dashboards and alert rules are read with the Prometheus PromQL parser: every
// expression parses, and every selector of it names a metric the manager or the gateway exports
// (or one Prometheus itself makes), with labels the metric carries (or the scrape target's), and
// values of closed label sets that exist.

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// targetLabels are the labels Prometheus adds to every series from its scrape target (the
// Prometheus Operator's ServiceMonitor relabelling).
var targetLabels = []string{"job", "namespace", "pod", "service", "container", "endpoint", "instance"}

// prometheusMetrics are the series Prometheus makes itself for every target, and those of
// controller-runtime's registry the manager serves beside its own (the names and labels of
// controller-runtime's pkg/internal/controller/metrics).
var prometheusMetrics = map[string][]string{"up": nil, "scrape_duration_seconds": nil,
	"controller_runtime_reconcile_total": {"controller", "result"}, "controller_runtime_reconcile_errors_total": {"controller"},
	"controller_runtime_active_workers": {"controller"}, "workqueue_depth": {"name", "controller"}}

// exprProblems parses expr and lists what its selectors name that the binaries do not export: an
// unknown metric, a label the metric does not carry, a value outside a closed label set. A parse
// error is the only problem when the expression does not parse.
func exprProblems(expr string, exported map[string][]string) []string {
	e, err := parser.ParseExpr(expr)
	if err != nil {
		return []string{"does not parse: " + err.Error()}
	}
	var problems []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		metric := vs.Name
		known, ok := exported[metric]
		if !ok {
			known, ok = prometheusMetrics[metric]
		}
		if !ok {
			problems = append(problems, "unknown metric "+metric)
			return nil
		}
		carried := append(slices.Clone(known), targetLabels...)
		for _, m := range vs.LabelMatchers {
			if m.Name == labels.MetricName {
				continue
			}
			if !slices.Contains(carried, m.Name) {
				problems = append(problems, metric+" has no label "+m.Name)
				continue
			}
			values, closed := closedValues(metric, m.Name)
			if !closed || (m.Type != labels.MatchEqual && m.Type != labels.MatchRegexp) {
				continue
			}
			for _, v := range strings.Split(m.Value, "|") {
				if !slices.Contains(values, v) {
					problems = append(problems, "unknown "+m.Name+" "+v)
				}
			}
		}
		return nil
	})
	return problems
}

// renderedDashboards returns every dashboard the monitoring matrix entry renders, by ConfigMap
// key.
func renderedDashboards(t *testing.T) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, o := range objects(t, render(t, "prod", "prod-ns", chartMatrix["monitoring"])) {
		if o.GetKind() != "ConfigMap" || o.GetLabels()["grafana_dashboard"] != "1" {
			continue
		}
		data, _, _ := unstructured.NestedStringMap(o.Object, "data")
		for key, body := range data {
			var d map[string]any
			if err := json.Unmarshal([]byte(body), &d); err != nil {
				t.Fatalf("%s/%s: not JSON: %v", o.GetName(), key, err)
			}
			out[key] = d
		}
	}
	return out
}

// panelExprs lists "panel title: expr" for every query target of every panel of d.
func panelExprs(d map[string]any) map[string]string {
	out := map[string]string{}
	panels, _ := d["panels"].([]any)
	for _, p := range panels {
		pm, _ := p.(map[string]any)
		targets, _ := pm["targets"].([]any)
		for i, tg := range targets {
			if expr, ok := tg.(map[string]any)["expr"].(string); ok {
				out[fmt.Sprintf("%v[%d]", pm["title"], i)] = expr
			}
		}
	}
	return out
}

// TestChartDashboardsNameRealMetrics: both dashboards ship, in ConfigMaps labelled for Grafana's
// sidecar, and every panel expression and every alert expression passes exprProblems.
func TestChartDashboardsNameRealMetrics(t *testing.T) {
	exported := exportedMetrics(t)
	dashboards := renderedDashboards(t)
	for _, key := range []string{"connector-mcp-manager.json", "connector-mcp-gateway.json"} {
		d, ok := dashboards[key]
		if !ok {
			t.Errorf("no dashboard %s rendered (have %v)", key, slices.Sorted(maps.Keys(dashboards)))
			continue
		}
		exprs := panelExprs(d)
		if len(exprs) < 5 {
			t.Errorf("%s: %d panel expressions, want the dashboard's panels", key, len(exprs))
		}
		for panel, expr := range exprs {
			if p := exprProblems(expr, exported); len(p) > 0 {
				t.Errorf("%s %s: %v (expr %s)", key, panel, p, expr)
			}
		}
	}
	for alert, expr := range renderedRules(t) {
		if p := exprProblems(expr, exported); len(p) > 0 {
			t.Errorf("alert %s: %v (expr %s)", alert, p, expr)
		}
	}
	if n := len(objects(t, render(t, "prod", "prod-ns", chartMatrix["gateway"]))); n == 0 {
		t.Fatal("nothing rendered")
	}
	for _, o := range objects(t, render(t, "prod", "prod-ns", chartMatrix["gateway"])) {
		if o.GetLabels()["grafana_dashboard"] != "" {
			t.Errorf("dashboards are off by default, but %s/%s is rendered", o.GetKind(), o.GetName())
		}
	}
}

// TestChartExpressionCheckDetectsMistakes is the must-fail twin: an unparseable expression, a
// renamed metric, a label the metric lacks and an unknown outcome are each reported.
func TestChartExpressionCheckDetectsMistakes(t *testing.T) {
	exported := exportedMetrics(t)
	for expr, want := range map[string]string{
		`sum(rate(connector_mcp_gateway_requests_total[5m])`:                                                            "does not parse",
		`sum(rate(connector_mcp_gateway_request_total[5m]))`:                                                            "unknown metric connector_mcp_gateway_request_total",
		`sum by (deployment) (rate(connector_mcp_gateway_calls_total{deployment="x"}[5m]))`:                             "connector_mcp_gateway_calls_total has no label deployment",
		`sum(rate(connector_mcp_gateway_requests_total{outcome=~"ok|upstream_failed"}[5m]))`:                            "unknown outcome upstream_failed",
		`histogram_quantile(0.99, sum by (le) (rate(connector_mcp_freeze_duration_seconds_bucket{namespace="x"}[5m])))`: "",
		`max(up{job="x"})`: "",
	} {
		p := exprProblems(expr, exported)
		if want == "" {
			if len(p) != 0 {
				t.Errorf("%s: problems %v, want none", expr, p)
			}
			continue
		}
		if !slices.ContainsFunc(p, func(s string) bool { return strings.HasPrefix(s, want) }) {
			t.Errorf("%s: problems %v, want %q", expr, p, want)
		}
	}
}
