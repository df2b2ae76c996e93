package envtest

// The chart's PrometheusRule names metrics and labels that the manager really exports: each
// connector_mcp_* selector of every alert expression is checked against the descriptors of the
// metrics the code registers, so renaming a metric or a label breaks this test.

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/audit"
	"github.com/b10x/connector-mcp/internal/controllers"
	"github.com/b10x/connector-mcp/internal/gateway"
	"github.com/b10x/connector-mcp/internal/review"
)

// exportedMetrics returns the connector_mcp_* metric names the manager registers, with their
// variable labels (histogram series names included).
func exportedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	var cs []prometheus.Collector
	m := controllers.NewMetrics()
	cs = append(cs, m.Activations, m.Refusals, m.DriftDetections, m.DriftClasses, m.FreezeDuration, m.VerificationCacheHits, m.VerificationCacheMisses)
	cs = append(cs, controllers.NewRefusedCollector(k8sClient))
	w := review.NewWebhookMetrics()
	cs = append(cs, w.Sent, w.Dropped, w.QueueFull)
	aw := audit.NewWebhookMetrics()
	cs = append(cs, aw.Sent, aw.Dropped)
	g := gateway.NewMetrics(nil)
	cs = append(cs, g.Requests, g.Calls, g.CallDuration, g.InFlight, g.CacheLookups, g.Surfaces, g.DirectCalls, g.Approvals, g.TokenReviews, g.AddedLatency)
	out := map[string][]string{}
	for _, c := range cs {
		for name, labels := range describedLabels(t, c) {
			out[name] = labels
			if _, isHist := c.(*prometheus.HistogramVec); isHist {
				for _, suf := range []string{"_bucket", "_sum", "_count"} {
					out[name+suf] = append(slices.Clone(labels), "le")
				}
			}
		}
	}
	return out
}

var descRe = regexp.MustCompile(`fqName: "([a-z_]+)".*variableLabels: \{([a-z_,]*)\}`)

// describedLabels returns the variable labels of each metric c describes, by metric name.
func describedLabels(t testing.TB, c prometheus.Collector) map[string][]string {
	t.Helper()
	ch := make(chan *prometheus.Desc, 16)
	go func() { c.Describe(ch); close(ch) }()
	out := map[string][]string{}
	for d := range ch {
		sub := descRe.FindStringSubmatch(d.String())
		if sub == nil {
			t.Fatalf("cannot parse %s", d)
		}
		var labels []string
		if sub[2] != "" {
			labels = strings.Split(sub[2], ",")
		}
		out[sub[1]] = labels
	}
	return out
}

var (
	seriesRe  = regexp.MustCompile(`(connector_mcp_[a-z_]+)(\{([^}]*)\})?`)
	matcherRe = regexp.MustCompile(`([a-z_]+)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
)

// labelValues are the values a label with a closed set may take, keyed by label name or by
// "metric/label" for one metric's label: the review classes, the TokenReview results, and the
// gateway's outcomes ("ok" or the name of one of its own refusals).
var labelValues = map[string][]string{
	"class": review.Classes,
	"connector_mcp_gateway_token_reviews_total/result": gateway.TokenReviewResults,
	"outcome": {"ok", gateway.RefusalUnauthenticated, gateway.RefusalCallerBusy, gateway.RefusalOverloaded,
		gateway.RefusalShuttingDown, gateway.RefusalHostNotAllowed, gateway.RefusalNotFound, gateway.RefusalNotActive,
		gateway.RefusalInvalidParams, gateway.RefusalUnknownTool, gateway.RefusalDeadlineExceeded,
		gateway.RefusalResultNotRepresentable, gateway.RefusalAuthorizationUnavailable, gateway.RefusalAuthRateLimited,
		gateway.RefusalRequestBodyTimeout, gateway.RefusalCallFailed},
}

// closedValues returns the values label may take on metric, when they are a closed set: those of
// labelValues["metric/label"], else labelValues["label"].
func closedValues(metric, label string) ([]string, bool) {
	if v, ok := labelValues[metric+"/"+label]; ok {
		return v, true
	}
	v, ok := labelValues[label]
	return v, ok
}

// gatewayTargetLabels are the labels Prometheus adds to the gateway's series from its
// ServiceMonitor target, by which the gateway's rules select the release's gateway.
var gatewayTargetLabels = []string{"job", "namespace"}

// ruleProblems lists the connector_mcp_* selectors of expr that name a metric the manager or the
// gateway does not export, a label it does not carry, or a class or outcome that does not exist.
func ruleProblems(expr string, exported map[string][]string) []string {
	var problems []string
	uses := seriesRe.FindAllStringSubmatch(expr, -1)
	for _, u := range uses {
		labels, ok := exported[u[1]]
		if !ok {
			problems = append(problems, "unknown metric "+u[1])
			continue
		}
		if strings.HasPrefix(u[1], "connector_mcp_gateway_") {
			labels = append(slices.Clone(labels), gatewayTargetLabels...)
		}
		for _, mt := range matcherRe.FindAllStringSubmatch(u[3], -1) {
			if !slices.Contains(labels, mt[1]) {
				problems = append(problems, u[1]+" has no label "+mt[1])
				continue
			}
			known, ok := closedValues(u[1], mt[1])
			if !ok {
				continue
			}
			for _, v := range strings.Split(mt[3], "|") {
				if !slices.Contains(known, v) {
					problems = append(problems, "unknown "+mt[1]+" "+v)
				}
			}
		}
	}
	return problems
}

// renderedRules returns the expression of every alert of the monitoring matrix entry (manager
// and gateway rules).
func renderedRules(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for alert, r := range renderedAlerts(t) {
		out[alert] = r["expr"].(string)
	}
	return out
}

// renderedAlerts returns every alert rule of the monitoring matrix entry by name.
func renderedAlerts(t *testing.T) map[string]map[string]any {
	t.Helper()
	for _, o := range objects(t, render(t, "prod", "prod-ns", chartMatrix["monitoring"])) {
		if o.GetKind() != "PrometheusRule" {
			continue
		}
		groups, _, _ := unstructured.NestedSlice(o.Object, "spec", "groups")
		out := map[string]map[string]any{}
		for _, g := range groups {
			rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
			for _, r := range rules {
				rm := r.(map[string]any)
				out[rm["alert"].(string)] = rm
			}
		}
		return out
	}
	t.Fatal("no PrometheusRule rendered")
	return nil
}

func TestChartPrometheusRuleNamesRealMetrics(t *testing.T) {
	exported := exportedMetrics(t)
	rules := renderedRules(t)
	// The drift alerts exist and use the drift metrics.
	for alert, metric := range map[string]string{
		"ConnectorMcpDriftAwaitingReview":       controllers.RefusedDeploymentsMetric,
		"ConnectorMcpDriftSurfaceGrew":          "connector_mcp_drift_total",
		"ConnectorMcpDriftWebhookDropping":      "connector_mcp_drift_webhook_dropped_total",
		"ConnectorMcpDeploymentRefusedForDrift": "connector_mcp_refusals_total",
	} {
		expr, ok := rules[alert]
		if !ok {
			t.Errorf("PrometheusRule lacks %s", alert)
			continue
		}
		if !strings.Contains(expr, metric) {
			t.Errorf("%s: expr %q does not use %s", alert, expr, metric)
		}
	}
	if !strings.Contains(rules["ConnectorMcpDriftAwaitingReview"], `reason="`+v1.ReasonSnapshotDrift+`"`) {
		t.Errorf("ConnectorMcpDriftAwaitingReview does not select the drift reason: %s", rules["ConnectorMcpDriftAwaitingReview"])
	}
	for alert, expr := range rules {
		if p := ruleProblems(expr, exported); len(p) > 0 {
			t.Errorf("%s: %v (expr %s)", alert, p, expr)
		}
	}
}

// Must-fail twin: the check catches a renamed metric, a renamed label and an unknown class.
func TestChartPrometheusRuleCheckDetectsRenames(t *testing.T) {
	exported := exportedMetrics(t)
	for expr, want := range map[string]string{
		`max by (namespace) (connector_mcp_refused_deployment{reason="SnapshotDrift"}) > 0`:                   "unknown metric connector_mcp_refused_deployment",
		`max (connector_mcp_refused_deployments{namespace="x",reason="SnapshotDrift"}) > 0`:                   "connector_mcp_refused_deployments has no label namespace",
		`increase(connector_mcp_drift_total{class=~"new_tool|widened_schema"}[1h]) > 0`:                       "unknown class widened_schema",
		`increase(connector_mcp_drift_webhook_drops_total[30m]) > 0`:                                          "unknown metric connector_mcp_drift_webhook_drops_total",
		`rate(connector_mcp_gateway_requests_total{outcome=~"call_failed|upstream_failed"}[5m])`:              "unknown outcome upstream_failed",
		`rate(connector_mcp_gateway_calls_total{deployment="x"}[5m])`:                                         "connector_mcp_gateway_calls_total has no label deployment",
		`histogram_quantile(0.9, rate(connector_mcp_freeze_duration_seconds_bucket{le="1",result="ok"}[5m]))`: "",
	} {
		p := ruleProblems(expr, exported)
		if want == "" {
			if len(p) != 0 {
				t.Errorf("%s: problems %v, want none", expr, p)
			}
			continue
		}
		if !slices.Contains(p, want) {
			t.Errorf("%s: problems %v, want %q", expr, p, want)
		}
	}
}

// runbookProblems lists the alerts whose runbook_url is not base#<lower-case name> or whose
// section (a "## <name>" heading with Meaning, Impact, Diagnosis and Fix) is missing from the
// runbook page doc, and the page's sections that name no alert.
func runbookProblems(alerts map[string]map[string]any, base, doc string) []string {
	var problems []string
	sections := map[string]string{}
	parts := strings.Split("\n"+doc, "\n## ")
	for _, part := range parts[1:] {
		name, body, _ := strings.Cut(part, "\n")
		sections[strings.TrimSpace(name)] = body
	}
	for alert, rule := range alerts {
		ann, _ := rule["annotations"].(map[string]any)
		if url, _ := ann["runbook_url"].(string); url != base+"#"+strings.ToLower(alert) {
			problems = append(problems, alert+": runbook_url "+url)
		}
		body, ok := sections[alert]
		if !ok {
			problems = append(problems, alert+": no section in the runbooks")
			continue
		}
		for _, part := range []string{"**Meaning.**", "**Impact.**", "**Diagnosis.**", "**Fix.**"} {
			if !strings.Contains(body, part) {
				problems = append(problems, alert+": section lacks "+part)
			}
		}
	}
	for name := range sections {
		if _, ok := alerts[name]; !ok {
			problems = append(problems, "section "+name+" names no alert")
		}
	}
	slices.Sort(problems)
	return problems
}

// TestChartAlertsLinkRunbooks: every alert of the manager's and the gateway's rules links its
// section of docs/runbooks.md, which explains it, and the page documents no other alert. The
// gateway's rules select the job of the gateway's ServiceMonitor (its Service's name).
func TestChartAlertsLinkRunbooks(t *testing.T) {
	alerts := renderedAlerts(t)
	for _, want := range []string{"ConnectorMcpGatewayDown", "ConnectorMcpGatewayCallsFailing", "ConnectorMcpGatewayCallLatencyHigh",
		"ConnectorMcpGatewayAddedLatencyHigh", "ConnectorMcpGatewayRefusalRateHigh", "ConnectorMcpGatewayTokenReviewsFailing"} {
		r, ok := alerts[want]
		if !ok {
			t.Errorf("PrometheusRule lacks %s", want)
			continue
		}
		if expr := r["expr"].(string); !strings.Contains(expr, `job="prod-connector-mcp-gateway",namespace="prod-ns"`) {
			t.Errorf("%s does not select the gateway ServiceMonitor's job: %s", want, expr)
		}
	}
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "runbooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	if p := runbookProblems(alerts, "https://github.com/b10x/connector-mcp/blob/main/docs/runbooks.md", string(doc)); len(p) > 0 {
		t.Errorf("runbooks: %v", p)
	}
}

// TestChartRunbookCheckDetectsGaps is the twin: a page missing an alert's section, a section
// without its Fix, and a section for an alert that does not exist are reported.
func TestChartRunbookCheckDetectsGaps(t *testing.T) {
	base := "https://example.com/runbooks.md"
	alerts := map[string]map[string]any{
		"A": {"annotations": map[string]any{"runbook_url": base + "#a"}},
		"B": {"annotations": map[string]any{"runbook_url": base + "#b"}},
		"C": {"annotations": map[string]any{"runbook_url": base + "#wrong"}},
	}
	doc := "# Runbooks\n\n## A\n\n**Meaning.** x **Impact.** x **Diagnosis.** x **Fix.** x\n\n## C\n\n**Meaning.** **Impact.** **Diagnosis.**\n\n## D\n\nx\n"
	got := runbookProblems(alerts, base, doc)
	for _, want := range []string{"B: no section in the runbooks", "C: runbook_url " + base + "#wrong", "C: section lacks **Fix.**", "section D names no alert"} {
		if !slices.Contains(got, want) {
			t.Errorf("problems %v, want %q", got, want)
		}
	}
}
