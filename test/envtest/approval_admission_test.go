package envtest

import (
	"context"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
)

// TestApprovalRequestAdmission: the McpApprovalRequest schema and CEL hold by themselves (no
// admission policy here: that is TestStoryApproval's): a valid request is accepted and reads
// Pending; its spec is immutable; a decision is recorded with the state, a denial with a reason;
// a decision is final; the state moves only forward. Each accepted case has its rejected twin
// naming the field or the rule.
func TestApprovalRequestAdmission(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "approval-admission")
	d := "sha256:" + strings.Repeat("b", 64)
	valid := func(name string) *apiv1.McpApprovalRequest {
		return &apiv1.McpApprovalRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: apiv1.McpApprovalRequestSpec{DeploymentName: "svc", Operation: "drop", Effect: apiv1.EffectDestructive,
				Caller: apiv1.ApprovalCaller{Username: "system:serviceaccount:" + ns + ":agent"}, SnapshotDigest: d, ProfileDigest: d,
				ArgumentsDigest: d, ExpiresAt: metav1.NewTime(time.Now().Add(time.Hour))}}
	}
	// Create: valid, reads Pending (the status default); a bad digest and an unknown effect refused.
	rq := valid("a")
	mustCreate(t, rq)
	if err := k8sClient.Get(ctx, objKey(rq), rq); err != nil || rq.Status.State != apiv1.ApprovalPending {
		t.Fatalf("new request: state %q, %v (want Pending)", rq.Status.State, err)
	}
	bad := valid("bad")
	bad.Spec.ArgumentsDigest = "sha256:XYZ"
	assertRejected(t, k8sClient.Create(ctx, bad), "spec.argumentsDigest", "should match")
	bad = valid("bad")
	bad.Spec.Effect = "unreviewed"
	assertRejected(t, k8sClient.Create(ctx, bad), "spec.effect", "Unsupported value")
	// The spec is immutable.
	changed := rq.DeepCopy()
	changed.Spec.ArgumentsDigest = "sha256:" + strings.Repeat("c", 64)
	assertRejected(t, k8sClient.Update(ctx, changed), "spec", "spec is immutable")
	// A decision comes with its state; Approved without one, Denied without a reason refused.
	st := rq.DeepCopy()
	st.Status.State = apiv1.ApprovalApproved
	assertRejected(t, k8sClient.Status().Update(ctx, st), "status", "an approval or denial records its decision")
	st.Status.State = apiv1.ApprovalDenied
	st.Status.Decision = &apiv1.ApprovalDecision{Approver: "alice", Time: metav1.Now()}
	assertRejected(t, k8sClient.Status().Update(ctx, st), "status", "a denial gives a reason")
	st.Status.State = apiv1.ApprovalUsed
	assertRejected(t, k8sClient.Status().Update(ctx, st), "status", "state moves only")
	st.Status.State = apiv1.ApprovalApproved
	if err := k8sClient.Status().Update(ctx, st); err != nil {
		t.Fatalf("approve: %v", err)
	}
	// Final: another approver, or back to Pending, refused; Used without usedTime refused; Used with it accepted.
	again := st.DeepCopy()
	again.Status.Decision.Approver = "mallory"
	assertRejected(t, k8sClient.Status().Update(ctx, again), "status", "a decision is final")
	again = st.DeepCopy()
	again.Status.State = apiv1.ApprovalPending
	assertRejected(t, k8sClient.Status().Update(ctx, again), "status", "state moves only")
	again = st.DeepCopy()
	again.Status.State = apiv1.ApprovalUsed
	assertRejected(t, k8sClient.Status().Update(ctx, again), "status", "only an approved request is used")
	now := metav1.Now()
	again.Status.UsedTime = &now
	if err := k8sClient.Status().Update(ctx, again); err != nil {
		t.Fatalf("use: %v", err)
	}
	// A ServiceDeployment's approval is Required or None; anything else is refused.
	sd := newDeployment(ns, "svc", "svc", "svc", "https://mcp.example.com/mcp", &apiv1.ProfileDocument{Operations: []apiv1.OperationMapping{{OperationRef: "drop"}}}, nil, "g")
	sd.Spec.Operations[0].Approval = "Sometimes"
	assertRejected(t, k8sClient.Create(ctx, sd), "spec.operations[0].approval", "Unsupported value")
	sd.Spec.Operations[0].Approval = apiv1.ApprovalNone
	mustCreate(t, sd)
	// kubectl get shows operation, caller, state and age.
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := k8sClient.Get(ctx, types.NamespacedName{Name: "mcpapprovalrequests.connectors.b10x.io"}, crd); err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, c := range crd.Spec.Versions[0].AdditionalPrinterColumns {
		if c.Priority == 0 {
			cols = append(cols, c.Name)
		}
	}
	if got := strings.Join(cols, ","); got != "Deployment,Operation,Caller,State,Age" {
		t.Errorf("printer columns %s", got)
	}
}
