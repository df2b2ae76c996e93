package controllers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/activation"
)

// A waiting refusal reads Reconciling for the grace period, counted from when Reconciling became
// True for this generation, then Stalled, and stays Stalled for this generation; a new generation
// waits afresh (twin: without the restart, an old Reconciling time would stall it at once).
func TestWaitingRefusalGracePeriod(t *testing.T) {
	start := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	grace := time.Minute
	waiting := outcome{stages: []string{v1.ConditionBound}, failed: activation.GrantNotFound.New("grant RoleBinding %q does not exist in this namespace", "g")}
	var conds []metav1.Condition
	pass := func(gen int64, now time.Time) outcome {
		o := waiting
		o.waiting(conds, gen, now, grace)
		applyConditions(&conds, gen, now, o)
		return o
	}
	has := func(typ string) bool {
		for _, c := range conds {
			if c.Type == typ && c.Status == metav1.ConditionTrue {
				return true
			}
		}
		return false
	}
	if pass(1, start); !has(v1.ConditionReconciling) || has(v1.ConditionStalled) {
		t.Fatalf("first pass: %+v", conds)
	}
	if over, left := waitState(conds, 1, start.Add(40*time.Second), grace); over || left != 20*time.Second {
		t.Fatalf("40 s in: over %v, left %v", over, left)
	}
	if pass(1, start.Add(59*time.Second)); !has(v1.ConditionReconciling) {
		t.Fatalf("59 s in: %+v", conds)
	}
	if pass(1, start.Add(grace)); !has(v1.ConditionStalled) || has(v1.ConditionReconciling) {
		t.Fatalf("after the grace period: %+v", conds)
	}
	if pass(1, start.Add(2*grace)); !has(v1.ConditionStalled) {
		t.Fatalf("a Stalled wait went back to Reconciling: %+v", conds)
	}
	// A new generation (the tenant fixed a name) waits afresh.
	if pass(2, start.Add(3*grace)); !has(v1.ConditionReconciling) || has(v1.ConditionStalled) {
		t.Fatalf("generation 2: %+v", conds)
	}
	if pass(2, start.Add(3*grace+30*time.Second)); !has(v1.ConditionReconciling) {
		t.Fatalf("generation 2, 30 s in: %+v", conds)
	}
	// A transient failure of generation 3 begins its wait; its Reconciling time is not
	// generation 2's.
	conds = nil
	applyConditions(&conds, 2, start, outcome{stages: []string{v1.ConditionBound}, failed: activation.GrantUnreadable.New("x")})
	if pass(3, start.Add(10*grace)); !has(v1.ConditionReconciling) {
		t.Fatalf("generation 3 after an older Reconciling: %+v", conds)
	}
	if over, _ := waitState(conds, 3, start.Add(10*grace+time.Second), grace); over {
		t.Fatal("generation 3 kept generation 2's Reconciling time")
	}
}
