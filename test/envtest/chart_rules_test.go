package envtest

// The chart's PrometheusRule names metrics and labels that the manager really exports: each
// connector_mcp_* selector of every alert expression is checked against the descriptors of the
// metrics the code registers, so renaming a metric or a label breaks this test.

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/controllers"
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
	descRe := regexp.MustCompile(`fqName: "([a-z_]+)".*variableLabels: \{([a-z_,]*)\}`)
	out := map[string][]string{}
	for _, c := range cs {
		ch := make(chan *prometheus.Desc, 4)
		c.Describe(ch)
		close(ch)
		for d := range ch {
			sub := descRe.FindStringSubmatch(d.String())
			if sub == nil {
				t.Fatalf("cannot parse %s", d)
			}
			labels := strings.Split(sub[2], ",")
			if sub[2] == "" {
				labels = nil
			}
			out[sub[1]] = labels
			if _, isHist := c.(*prometheus.HistogramVec); isHist {
				for _, suf := range []string{"_bucket", "_sum", "_count"} {
					out[sub[1]+suf] = append(slices.Clone(labels), "le")
				}
			}
		}
	}
	return out
}

var (
	seriesRe  = regexp.MustCompile(`(connector_mcp_[a-z_]+)(\{([^}]*)\})?`)
	matcherRe = regexp.MustCompile(`([a-z_]+)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
)

// ruleProblems lists the connector_mcp_* selectors of expr that name a metric the manager does not
// export, a label it does not carry, or a class that is not a review class.
func ruleProblems(expr string, exported map[string][]string) []string {
	var problems []string
	uses := seriesRe.FindAllStringSubmatch(expr, -1)
	for _, u := range uses {
		labels, ok := exported[u[1]]
		if !ok {
			problems = append(problems, "unknown metric "+u[1])
			continue
		}
		for _, mt := range matcherRe.FindAllStringSubmatch(u[3], -1) {
			if !slices.Contains(labels, mt[1]) {
				problems = append(problems, u[1]+" has no label "+mt[1])
				continue
			}
			if mt[1] != "class" {
				continue
			}
			for _, v := range strings.Split(mt[3], "|") {
				if !slices.Contains(review.Classes, v) {
					problems = append(problems, "unknown class "+v)
				}
			}
		}
	}
	return problems
}

func renderedRules(t *testing.T) map[string]string {
	t.Helper()
	for _, o := range objects(t, render(t, "prod", "prod-ns", chartMatrix["monitoring"])) {
		if o.GetKind() != "PrometheusRule" {
			continue
		}
		groups, _, _ := unstructured.NestedSlice(o.Object, "spec", "groups")
		out := map[string]string{}
		for _, g := range groups {
			rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
			for _, r := range rules {
				rm := r.(map[string]any)
				out[rm["alert"].(string)] = rm["expr"].(string)
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
