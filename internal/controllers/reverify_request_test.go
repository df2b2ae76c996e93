package controllers

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	v1 "github.com/b10x/connector-mcp/api/v1"
)

// createReverifyRequest creates an McpReverifyRequest for deployment, created at at.
func (h *harness) createReverifyRequest(name, deployment string, at time.Time) {
	h.t.Helper()
	rq := &v1.McpReverifyRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(at)},
		Spec: v1.McpReverifyRequestSpec{DeploymentName: deployment, Reason: v1.ReverifyReasonLiveDrift}}
	if err := h.c.Create(context.Background(), rq); err != nil {
		h.t.Fatalf("create request: %v", err)
	}
}

// TestReverifyRequestForcesFreeze: an McpReverifyRequest created after the last freeze (what
// the gateway creates on live drift, instead of patching the deployment) makes the next pass
// freeze even when no re-verification is due; the freeze satisfies it, and the request
// reconciler then deletes it. Requests within ReverifyRequestMinInterval of the last freeze
// wait for it (a creator of requests can only cause a rate-limited re-verification).
func TestReverifyRequestForcesFreeze(t *testing.T) {
	_, objs := world(t)
	h := newHarness(t, objs...)
	h.dep.ReverifyInterval = 0
	h.activate()
	freezes := h.freezer.count()
	rr := &ReverifyRequestReconciler{Client: h.c}

	h.clock.SetTime(h.clock.Now().Add(10 * time.Second))
	h.createReverifyRequest("drift-1", "sd", h.clock.Now().Add(-time.Second))
	h.reconcileDeployment("sd")
	if h.freezer.count() != freezes+1 {
		t.Fatalf("the re-verify request did not force a freeze: %d freezes", h.freezer.count()-freezes)
	}
	h.reconcileDeployment("sd")
	if h.freezer.count() != freezes+1 {
		t.Fatal("a satisfied re-verify request froze again")
	}
	if _, err := rr.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "drift-1"}}); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "drift-1"}, &v1.McpReverifyRequest{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a satisfied request was not deleted: %v", err)
	}

	// Rate limit: a request right after the freeze waits until MinInterval has passed.
	h.createReverifyRequest("drift-2", "sd", h.clock.Now())
	res := h.reconcileDeployment("sd")
	if h.freezer.count() != freezes+1 {
		t.Fatal("a request within ReverifyRequestMinInterval of the last freeze froze at once")
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > v1.ReverifyRequestMinInterval {
		t.Fatalf("RequeueAfter = %v, want the wait for the rate limit", res.RequeueAfter)
	}
	if r, _ := rr.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "drift-2"}}); r.RequeueAfter <= 0 {
		t.Fatal("an outstanding request was neither kept for a retry nor deleted")
	}
	h.clock.SetTime(h.clock.Now().Add(v1.ReverifyRequestMinInterval + time.Second))
	h.reconcileDeployment("sd")
	if h.freezer.count() != freezes+2 {
		t.Fatalf("the rate-limited request never froze: %d freezes", h.freezer.count()-freezes)
	}
}

// TestReverifyRequestNotDue is the must-fail twin: a request older than the last freeze, and one
// naming another deployment, force no freeze; a request naming no deployment is deleted.
func TestReverifyRequestNotDue(t *testing.T) {
	_, objs := world(t)
	h := newHarness(t, objs...)
	h.dep.ReverifyInterval = 0
	h.activate()
	freezes := h.freezer.count()
	h.clock.SetTime(h.clock.Now().Add(time.Minute))
	h.createReverifyRequest("old", "sd", h.clock.Now().Add(-time.Hour))
	h.createReverifyRequest("other", "not-sd", h.clock.Now())
	h.reconcileDeployment("sd")
	if h.freezer.count() != freezes {
		t.Fatal("a satisfied or foreign request forced a freeze")
	}
	rr := &ReverifyRequestReconciler{Client: h.c}
	for _, name := range []string{"old", "other"} {
		if _, err := rr.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
		if err := h.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &v1.McpReverifyRequest{}); !apierrors.IsNotFound(err) {
			t.Fatalf("request %q was not deleted: %v", name, err)
		}
	}
}
