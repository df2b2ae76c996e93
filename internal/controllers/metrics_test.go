package controllers

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/b10x/connector-mcp/api/v1"
)

func deploymentWith(ns, name string, conds ...metav1.Condition) *v1.ServiceDeployment {
	sd := &v1.ServiceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	sd.Status.Conditions = conds
	return sd
}

func stalled(reason string) metav1.Condition {
	return metav1.Condition{Type: v1.ConditionStalled, Status: metav1.ConditionTrue, Reason: reason}
}

func TestCountRefused(t *testing.T) {
	items := []v1.ServiceDeployment{
		*deploymentWith("a", "drift1", stalled(v1.ReasonSnapshotDrift)),
		*deploymentWith("a", "drift2", stalled(v1.ReasonSnapshotDrift)),
		*deploymentWith("a", "grant", stalled(v1.ReasonGrantDenied)),
		*deploymentWith("b", "drift", stalled(v1.ReasonSnapshotDrift)),
		// Must-not-count twins: Ready, retrying (Reconciling), Stalled=False.
		*deploymentWith("b", "ready", metav1.Condition{Type: v1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1.ReasonActivated}),
		*deploymentWith("b", "retrying", metav1.Condition{Type: v1.ConditionReconciling, Status: metav1.ConditionTrue, Reason: v1.ReasonServerUnreachable}),
		*deploymentWith("c", "unstalled", metav1.Condition{Type: v1.ConditionStalled, Status: metav1.ConditionFalse, Reason: v1.ReasonSnapshotDrift}),
		// A reason this operator never writes cannot grow the label set.
		*deploymentWith("c", "forged", stalled("Forged"+strings.Repeat("x", 40))),
	}
	got := countRefused(items)
	want := map[refusedKey]int{
		{"a", v1.ReasonSnapshotDrift}: 2, {"a", v1.ReasonGrantDenied}: 1, {"b", v1.ReasonSnapshotDrift}: 1, {"c", refusedReasonOther}: 1,
	}
	if len(got) != len(want) {
		t.Fatalf("countRefused = %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Fatalf("countRefused[%v] = %d, want %d (all: %v)", k, got[k], n, got)
		}
	}
}

func newMetricsScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := v1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// The collector is derived from what the reader lists at each scrape: a deleted deployment
// leaves the gauge without incrementing or decrementing anything.
func TestRefusedCollectorFollowsTheReader(t *testing.T) {
	drift := deploymentWith("team-a", "svc", stalled(v1.ReasonSnapshotDrift))
	c := fake.NewClientBuilder().WithScheme(newMetricsScheme(t)).WithObjects(drift,
		deploymentWith("team-b", "ok", metav1.Condition{Type: v1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1.ReasonActivated})).Build()
	col := NewRefusedCollector(c)
	want := `# HELP connector_mcp_refused_deployments ServiceDeployments refused (Stalled=True) by namespace and reason, derived from the informer cache at each scrape.
# TYPE connector_mcp_refused_deployments gauge
connector_mcp_refused_deployments{deployment_namespace="team-a",reason="SnapshotDrift"} 1
`
	if err := testutil.CollectAndCompare(col, strings.NewReader(want), RefusedDeploymentsMetric); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(context.Background(), drift); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(col, RefusedDeploymentsMetric); n != 0 {
		t.Fatalf("series after the refused deployment was deleted = %d, want 0", n)
	}
}

// Must-fail twin: a reader that cannot list gives no series (never a stale or zero value).
func TestRefusedCollectorReaderFailure(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(newMetricsScheme(t)).WithObjects(deploymentWith("team-a", "svc", stalled(v1.ReasonSnapshotDrift))).
		WithInterceptorFuncs(interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return errors.New("cache not synced")
		}}).Build()
	if n := testutil.CollectAndCount(NewRefusedCollector(c), RefusedDeploymentsMetric); n != 0 {
		t.Fatalf("series from a failing reader = %d, want 0", n)
	}
	// The collector registers beside the counters under its own name.
	reg := prometheus.NewRegistry()
	if err := NewMetrics().Register(reg); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(NewRefusedCollector(c)); err != nil {
		t.Fatalf("register refused collector: %v", err)
	}
}
