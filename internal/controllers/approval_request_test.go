package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/writecount"
)

// TestApprovalRequestLifecycle: one Event per state (recorded once: a second pass writes nothing),
// Pending past its expiry becomes Expired, and an ended request is deleted after the retention.
func TestApprovalRequestLifecycle(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	d := "sha256:" + strings.Repeat("a", 64)
	rq := &v1.McpApprovalRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "apr-1"},
		Spec: v1.McpApprovalRequestSpec{DeploymentName: "svc", Operation: "drop", Effect: v1.EffectDestructive,
			Caller: v1.ApprovalCaller{Username: "agent"}, SnapshotDigest: d, ProfileDigest: d, ArgumentsDigest: d,
			ExpiresAt: metav1.NewTime(clk.Now().Add(time.Minute))}}
	writes := 0
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&v1.McpApprovalRequest{}).WithObjects(rq).
		WithInterceptorFuncs(writecount.Funcs(func() { writes++ })).Build()
	rec := events.NewFakeRecorder(10)
	r := &ApprovalRequestReconciler{Client: c, Events: rec, Clock: clk, Retention: time.Hour}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(rq)}
	pass := func() ctrl.Result {
		t.Helper()
		res, err := r.Reconcile(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	get := func() *v1.McpApprovalRequest {
		t.Helper()
		out := &v1.McpApprovalRequest{}
		if err := c.Get(context.Background(), req.NamespacedName, out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	pass()
	if got := get(); got.Status.State != v1.ApprovalPending || got.Status.AnnouncedState != v1.ApprovalPending {
		t.Fatalf("after the first pass: %+v", got.Status)
	}
	if e := <-rec.Events; !strings.Contains(e, ReasonApprovalRequested) || !strings.Contains(e, "drop") {
		t.Fatalf("event %q", e)
	}
	w := writes
	if res := pass(); writes != w || res.RequeueAfter != time.Minute {
		t.Fatalf("second pass: %d writes, requeue %s (want none, and the expiry)", writes-w, res.RequeueAfter)
	}
	clk.Step(time.Minute)
	pass() // Expired
	pass() // its Event
	if got := get(); got.Status.State != v1.ApprovalExpired || got.Status.AnnouncedState != v1.ApprovalExpired {
		t.Fatalf("after expiry: %+v", got.Status)
	}
	if e := <-rec.Events; !strings.Contains(e, "Warning "+ReasonApprovalExpired) {
		t.Fatalf("event %q", e)
	}
	if res := pass(); res.RequeueAfter != time.Hour {
		t.Fatalf("retention requeue %s", res.RequeueAfter)
	}
	clk.Step(time.Hour)
	pass()
	if err := c.Get(context.Background(), req.NamespacedName, &v1.McpApprovalRequest{}); err == nil {
		t.Fatal("an ended request outlived its retention")
	}
}
