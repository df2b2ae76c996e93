package envtest

import (
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
)

// applySamples applies config/samples files into ns with kubectl.
func applySamples(t *testing.T, ns string, files ...string) {
	t.Helper()
	for _, f := range files {
		if out, err := kubectlRun(t, nil, "apply", "-n", ns, "-f", filepath.Join(repoRoot, "config", "samples", f)); err != nil {
			t.Fatalf("apply %s: %v\n%s", f, err, out)
		}
	}
}

// TestSampleGrantBinds: with the sample invoke Role and RoleBinding, the sample deployment passes
// the Bound stage (its grant allows invoke on it) instead of stopping at GrantNotFound. (It then
// stops at the live freeze: weather.example.com is not a server this test can reach.)
func TestSampleGrantBinds(t *testing.T) {
	ns := newNamespace(t, "sample-grant")
	startOperator(t, ns, devOptions())
	applySamples(t, ns, sampleInline, "connectors_v1_invoke_grant.yaml", sampleDeployment)
	sd := &apiv1.ServiceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "weather"}}
	waitObj(t, sd, storyTimeout, "sample deployment Bound", func(sd *apiv1.ServiceDeployment) bool {
		return hasCondition(sd, apiv1.ConditionBound, metav1.ConditionTrue, apiv1.ReasonSucceeded)
	})
}

// TestSampleWithoutGrantIsRefused is the twin: the same samples without the grant file stop at
// Bound with GrantNotFound.
func TestSampleWithoutGrantIsRefused(t *testing.T) {
	ns := newNamespace(t, "sample-nogrant")
	startOperator(t, ns, devOptions())
	applySamples(t, ns, sampleInline, sampleDeployment)
	sd := &apiv1.ServiceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "weather"}}
	waitObj(t, sd, storyTimeout, "GrantNotFound", func(sd *apiv1.ServiceDeployment) bool {
		return hasCondition(sd, apiv1.ConditionBound, metav1.ConditionFalse, apiv1.ReasonGrantNotFound)
	})
}
