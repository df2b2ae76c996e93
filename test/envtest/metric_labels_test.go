package envtest

// Every label of every metric the manager and the gateway register has a declared bound, and no
// value a tenant, a workload or an MCP server chooses ever becomes a label value: the manager and
// the gateway are driven with names that all carry hostileMarker (the ServiceAccount, the
// profile, the deployments, the provider, a tool of the upstream, unknown tools and deployments
// asked for, a token), then every series of their registries is read.

import (
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/audit"
	"github.com/b10x/connector-mcp/internal/gateway"
	"github.com/b10x/connector-mcp/internal/invocation"
	"github.com/b10x/connector-mcp/internal/mcptest"
	"github.com/b10x/connector-mcp/internal/review"
	"github.com/b10x/connector-mcp/internal/webhookpost"
)

// hostileMarker is in every name the story's tenant, workload and upstream choose.
const hostileMarker = "zzhx"

// labelBound bounds one label's values: a closed set written in the code, or a namespace name
// (bounded by the cluster's namespaces, which tenants do not create).
type labelBound struct {
	values    []string
	namespace bool
}

// codeConstants returns the values of the string constants of the module's non-test Go files
// whose names start with prefix (e.g. every Refusal* name of every package): a set the code
// bounds, whatever a tenant writes.
func codeConstants(t testing.TB, prefix string) []string {
	t.Helper()
	var out []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != repoRoot && (strings.HasPrefix(n, ".") || n == "test" || n == "node_modules" || n == "testdata" || n == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !strings.HasPrefix(name.Name, prefix) || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						if v, err := strconv.Unquote(lit.Value); err == nil {
							out = append(out, v)
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// metricLabelBounds declares the bound of every label the binaries use, keyed "metric/label" for
// one metric's label or "label" for every metric's (as closedValues).
func metricLabelBounds(t testing.TB) map[string]labelBound {
	refusals := append([]string{"ok"}, codeConstants(t, "Refusal")...)
	reasons := append([]string{"Other"}, codeConstants(t, "Reason")...)
	return map[string]labelBound{
		// The gateway's.
		"route":   {values: []string{"deployment", "meta"}},
		"outcome": {values: append(slices.Clone(refusals), gateway.RefusedFeatures...)},
		"connector_mcp_gateway_approvals_total/event":      {values: append([]string{"requested", "used"}, refusals...)},
		"connector_mcp_gateway_cache_lookups_total/cache":  {values: []string{"token", "authz"}},
		"connector_mcp_gateway_cache_lookups_total/result": {values: []string{"hit", "miss"}},
		"connector_mcp_gateway_token_reviews_total/result": {values: gateway.TokenReviewResults},
		// The manager's.
		"connector_mcp_freeze_duration_seconds/result":           {values: []string{"ok", "error"}},
		"connector_mcp_refusals_total/kind":                      {values: []string{"McpServiceProfile", "ServiceDeployment"}},
		"connector_mcp_refusals_total/reason":                    {values: reasons},
		"connector_mcp_refused_deployments/reason":               {values: reasons},
		"connector_mcp_refused_deployments/deployment_namespace": {namespace: true},
		"connector_mcp_drift_total/class":                        {values: review.Classes},
		"connector_mcp_drift_webhook_dropped_total/reason":       {values: webhookpost.DropReasons},
		"connector_mcp_audit_webhook_dropped_total/reason":       {values: webhookpost.DropReasons},
		"connector_mcp_drift_webhook_queue_full_total/namespace": {namespace: true},
	}
}

// boundOf returns the declared bound of label on metric.
func boundOf(bounds map[string]labelBound, metric, label string) (labelBound, bool) {
	if b, ok := bounds[metric+"/"+label]; ok {
		return b, true
	}
	b, ok := bounds[label]
	return b, ok
}

// labelProblems lists every label of declared (metric → labels, as described) without a bound,
// and every series of families whose label value carries marker, lies outside its closed set, or
// names no namespace of namespaces.
func labelProblems(declared map[string][]string, families []*dto.MetricFamily, bounds map[string]labelBound, namespaces map[string]bool, marker string) []string {
	var problems []string
	for metric, labels := range declared {
		for _, l := range labels {
			if _, ok := boundOf(bounds, metric, l); !ok {
				problems = append(problems, fmt.Sprintf("%s: label %s has no declared bound", metric, l))
			}
		}
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				name, v := lp.GetName(), lp.GetValue()
				series := fmt.Sprintf("%s{%s=%q}", f.GetName(), name, v)
				if strings.Contains(strings.ToLower(v), marker) {
					problems = append(problems, series+": a name a tenant chose")
				}
				b, ok := boundOf(bounds, f.GetName(), name)
				switch {
				case !ok:
					// Reported above, from the descriptors.
				case b.namespace && !namespaces[v]:
					problems = append(problems, series+": not a namespace")
				case !b.namespace && !slices.Contains(b.values, v):
					problems = append(problems, series+": outside its closed set")
				}
			}
		}
	}
	slices.Sort(problems)
	return slices.Compact(problems)
}

// registryOf registers cs with a new registry and returns it with the labels each describes.
func registryOf(t testing.TB, cs ...prometheus.Collector) (*prometheus.Registry, map[string][]string) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	declared := map[string][]string{}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			t.Fatal(err)
		}
		for name, labels := range describedLabels(t, c) {
			declared[name] = labels
		}
	}
	return reg, declared
}

// collecting is a prometheus.Registerer that only records what a metric set's Register gives it,
// so a test registers exactly the collectors the binary would.
type collecting []prometheus.Collector

func (c *collecting) Register(x prometheus.Collector) error { *c = append(*c, x); return nil }
func (c *collecting) MustRegister(xs ...prometheus.Collector) {
	*c = append(*c, xs...)
}
func (c *collecting) Unregister(prometheus.Collector) bool { return false }

// TestMetricLabelsAreBounded drives the manager and the gateway with hostile names — a drifted
// deployment, a Ready one, calls that succeed and calls refused for every reason a caller can
// provoke — and then checks every series of both registries with labelProblems.
func TestMetricLabelsAreBounded(t *testing.T) {
	ns := newNamespace(t, "labels")
	op := startOperator(t, ns, devOptions())
	ctx := context.Background()
	m := hostileMarker
	for _, sa := range []string{m + "-agent", m + "-stranger"} {
		mustCreate(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}})
	}
	grant := m + "-grant"
	mustCreate(t, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: grant},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"invoke"}, APIGroups: []string{apiv1.GroupVersion.Group}, Resources: []string{"servicedeployments"}}}})
	mustCreate(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: grant},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: grant},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: m + "-agent", Namespace: ns}}})

	// The upstream names a tool; a second deployment, reviewed without it, drifts when its
	// server shows it too.
	hostileTool := &mcp.Tool{Name: m + "_tool", Description: "server prose " + m, InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)}
	wider := func() *switchable {
		_, h := modernServer(append(mcptest.DefaultTools(), hostileTool))
		return startSwitchable(t, h)
	}
	up, grown := wider(), wider()
	_, h2 := modernServer(mcptest.DefaultTools())
	narrower := startSwitchable(t, h2)

	doc := reviewedProfile(t, up.URL)
	doc.Service = apiv1.ServiceIdentity{Ref: m + "-svc", ConnectionRef: m + "-conn"}
	mustCreate(t, inlineProfile(ns, m+"-profile", doc))
	sd := newDeployment(ns, m+"-dep", m+"-profile", m+"-prov", up.URL, doc, nil, grant)
	mustCreate(t, sd)
	waitObj(t, sd, storyTimeout, "hostile deployment Ready", isReady[*apiv1.ServiceDeployment])

	doc2 := reviewedProfile(t, narrower.URL)
	doc2.Service = apiv1.ServiceIdentity{Ref: m + "-svc2", ConnectionRef: m + "-conn2"}
	mustCreate(t, inlineProfile(ns, m+"-profile2", doc2))
	drifted := newDeployment(ns, m+"-drifted", m+"-profile2", m+"-prov2", grown.URL, doc2, nil, grant)
	mustCreate(t, drifted)
	waitObj(t, drifted, storyTimeout, "drifted deployment refused", func(d *apiv1.ServiceDeployment) bool {
		return hasCondition(d, apiv1.ConditionStalled, metav1.ConditionTrue, apiv1.ReasonSnapshotDrift)
	})

	base, w, _ := startGateway(t, ns, gatewayOptions())
	agent := mintToken(t, ns, m+"-agent", "connector-mcp")
	cs, err := mcpConnect(t, base+"/mcp/"+ns+"/"+m+"-dep", agent, "")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, storyTimeout, "gateway serves the hostile deployment", func() error { _, err := listTools(cs); return err })
	if res, err := callTool(cs, m+"_tool", map[string]any{"q": m}); err != nil || res.IsError {
		t.Fatalf("the hostile tool: %+v, %v", res, err)
	}
	if _, err := callTool(cs, m+"_unknown", nil); refusedName(err) == "" {
		t.Fatalf("unknown tool: %v, want a refusal", err)
	}
	if _, err := callTool(cs, "add", map[string]any{"a": m}); refusedName(err) != invocation.RefusalInvalidArguments {
		t.Fatalf("bad arguments: %v", err)
	}
	if _, err := cs.ListPrompts(ctx, nil); err == nil {
		t.Fatal("prompts/list served")
	}
	meta, err := mcpConnect(t, base+"/mcp", agent, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := meta.CallTool(ctx, &mcp.CallToolParams{Name: "search_operations", Arguments: map[string]any{"query": m}}); err != nil {
		t.Fatalf("search_operations: %v", err)
	}
	if stranger, err := mcpConnect(t, base+"/mcp/"+ns+"/"+m+"-dep", mintToken(t, ns, m+"-stranger", "connector-mcp"), ""); err == nil {
		if _, err := callTool(stranger, "echo", map[string]any{"text": m}); refusedName(err) == "" {
			t.Fatalf("a stranger's call: %v, want a refusal", err)
		}
	}
	for _, path := range []string{"/mcp/" + ns + "/" + m + "-drifted", "/mcp/" + m + "-ns/" + m + "-missing"} {
		other, err := mcpConnect(t, base+path, agent, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := listTools(other); refusedName(err) == "" {
			t.Fatalf("%s: %v, want a refusal", path, err)
		}
	}
	for _, token := range []string{mintToken(t, ns, m+"-agent", m+"-audience"), m + "-not-a-token"} {
		if status, _, _ := rawPost(t, base+"/mcp/"+ns+"/"+m+"-dep", token); status != http.StatusUnauthorized {
			t.Fatalf("a wrong token: status %d, want 401", status)
		}
	}

	var manager, gw collecting
	if err := op.wired.Metrics.Register(&manager); err != nil {
		t.Fatal(err)
	}
	// The webhook sinks' counters (their sinks are not configured here: the labels are).
	if err := review.NewWebhookMetrics().Register(&manager); err != nil {
		t.Fatal(err)
	}
	if err := audit.NewWebhookMetrics().Register(&manager); err != nil {
		t.Fatal(err)
	}
	if err := w.Metrics.Register(&gw); err != nil {
		t.Fatal(err)
	}
	reg, declared := registryOf(t, append(append(manager, op.wired.Refused), gw...)...)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	namespaces := map[string]bool{}
	nsl := &corev1.NamespaceList{}
	if err := k8sClient.List(ctx, nsl); err != nil {
		t.Fatal(err)
	}
	for _, n := range nsl.Items {
		namespaces[n.Name] = true
	}
	if p := labelProblems(declared, families, metricLabelBounds(t), namespaces, m); len(p) > 0 {
		t.Errorf("unbounded labels:\n  %s", strings.Join(p, "\n  "))
	}

	// The story reached what it checks: the outcomes, refusals and reviews it provoked are series.
	seen := map[string]bool{}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			for _, lp := range s.GetLabel() {
				seen[f.GetName()+"/"+lp.GetValue()] = true
			}
		}
	}
	for _, want := range []string{
		"connector_mcp_gateway_requests_total/ok", "connector_mcp_gateway_requests_total/" + invocation.RefusalInvalidArguments,
		"connector_mcp_gateway_requests_total/" + gateway.RefusalUnauthenticated, "connector_mcp_gateway_requests_total/prompts",
		"connector_mcp_gateway_token_reviews_total/" + gateway.TokenReviewWrongAudience,
		"connector_mcp_refusals_total/" + apiv1.ReasonSnapshotDrift, "connector_mcp_refused_deployments/" + ns,
		"connector_mcp_drift_total/new_tool",
	} {
		if !seen[want] {
			t.Errorf("no series %s: the story did not provoke what it checks", want)
		}
	}
}

// TestMetricLabelCheckDetectsUnboundedLabels is the must-fail twin: a metric labelled by
// operation, fed a tenant's tool name, is reported twice (no declared bound; a tenant's name),
// and a value outside a closed set and a namespace that does not exist are reported.
func TestMetricLabelCheckDetectsUnboundedLabels(t *testing.T) {
	byOp := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "connector_mcp_gateway_calls_by_operation_total", Help: "x"}, []string{"operation"})
	byOp.WithLabelValues(hostileMarker + "_tool").Inc()
	calls := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "connector_mcp_gateway_calls_total", Help: "x"}, []string{"route", "outcome"})
	calls.WithLabelValues("deployment", "made_up_refusal").Inc()
	refused := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "connector_mcp_refused_deployments", Help: "x"}, []string{"deployment_namespace", "reason"})
	refused.WithLabelValues("ghost-namespace", apiv1.ReasonSnapshotDrift).Set(1)
	reg, declared := registryOf(t, byOp, calls, refused)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := labelProblems(declared, families, metricLabelBounds(t), map[string]bool{"real": true}, hostileMarker)
	for _, want := range []string{
		"connector_mcp_gateway_calls_by_operation_total: label operation has no declared bound",
		`connector_mcp_gateway_calls_by_operation_total{operation="zzhx_tool"}: a name a tenant chose`,
		`connector_mcp_gateway_calls_total{outcome="made_up_refusal"}: outside its closed set`,
		`connector_mcp_refused_deployments{deployment_namespace="ghost-namespace"}: not a namespace`,
	} {
		if !slices.Contains(got, want) {
			t.Errorf("problems %v, want %q", got, want)
		}
	}
	if p := labelProblems(declared, families, metricLabelBounds(t), map[string]bool{"ghost-namespace": true}, hostileMarker); slices.Contains(p, `connector_mcp_refused_deployments{reason="SnapshotDrift"}: outside its closed set`) {
		t.Errorf("a real reason was refused: %v", p)
	}
}
