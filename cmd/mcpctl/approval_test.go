package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
)

// approvalFixture creates a namespace with two pending requests ("a" and "b") and returns it.
func approvalFixture(t *testing.T, c client.Client) string {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "approval-"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), ns) })
	d := "sha256:" + strings.Repeat("a", 64)
	for _, name := range []string{"a", "b"} {
		rq := &apiv1.McpApprovalRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: name},
			Spec: apiv1.McpApprovalRequestSpec{DeploymentName: "svc", Operation: "drop_table", Effect: apiv1.EffectDestructive,
				Caller: apiv1.ApprovalCaller{Username: "system:serviceaccount:" + ns.Name + ":agent"}, SnapshotDigest: d, ProfileDigest: d,
				ArgumentsDigest: d, ExpiresAt: metav1.NewTime(time.Now().Add(time.Hour)),
				Preview: []apiv1.ArgumentPreview{{Name: "table", Value: "\"customers\u202e\"", Digest: d}, {Name: "token", Sensitive: true, Digest: d}}}}
		if err := c.Create(ctx, rq); err != nil {
			t.Fatal(err)
		}
	}
	return ns.Name
}

// TestApproveDenyListShow: approve and deny record the caller's own identity (the envtest admin
// here, so no admission policy is involved: the policy has its story in test/envtest), list and
// show print the state and the preview, and every must-pass has its refused twin.
func TestApproveDenyListShow(t *testing.T) {
	c, getenv := reviewEnv(t)
	ns := approvalFixture(t, c)

	code, out, errOut := runServerCLI(t, getenv, "approval", "list", "-n", ns)
	if code != exitOK || !strings.Contains(out, ns+"/a") || !strings.Contains(out, "Pending") || !strings.Contains(out, "drop_table") {
		t.Fatalf("approval list: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = runServerCLI(t, getenv, "approve", ns+"/a")
	if code != exitOK || !strings.Contains(out, ns+"/a approved by ") {
		t.Fatalf("approve: exit %d\n%s", code, out)
	}
	rq := &apiv1.McpApprovalRequest{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "a"}, rq); err != nil {
		t.Fatal(err)
	}
	if rq.Status.State != apiv1.ApprovalApproved || rq.Status.Decision == nil || rq.Status.Decision.Approver == "" || len(rq.Status.Decision.ApproverGroups) == 0 {
		t.Fatalf("approved status: %+v", rq.Status)
	}
	// Twins: approving again, denying a decided one, denying without a reason.
	if code, _, errOut := runServerCLI(t, getenv, "approve", "a", "-n", ns); code != exitRefused || !strings.Contains(errOut, "refused: "+RefusalApprovalNotPending) {
		t.Fatalf("approve twice: exit %d %s", code, errOut)
	}
	if code, _, _ := runServerCLI(t, getenv, "deny", ns+"/b"); code != exitUsage {
		t.Fatalf("deny without --reason: exit %d, want usage", code)
	}
	if code, _, errOut := runServerCLI(t, getenv, "approve", ns+"/missing"); code != exitFailure || !strings.Contains(errOut, "not found") {
		t.Fatalf("approve a missing request: exit %d %s", code, errOut)
	}
	code, out, _ = runServerCLI(t, getenv, "deny", "b", "-n", ns, "--reason", "not now", "-o", "json")
	var denied apiv1.McpApprovalRequest
	if code != exitOK || json.Unmarshal([]byte(out), &denied) != nil || denied.Status.State != apiv1.ApprovalDenied || denied.Status.Decision.Reason != "not now" {
		t.Fatalf("deny -o json: exit %d\n%s", code, out)
	}
	// show: the preview, the sensitive argument by digest only, the decision; control characters escaped.
	code, out, _ = runServerCLI(t, getenv, "approval", "show", ns+"/a")
	if code != exitOK || !strings.Contains(out, "state:      Approved") || !strings.Contains(out, "token: (sensitive) sha256:") ||
		!strings.Contains(out, `\u{202E}`) || strings.Contains(out, "\u202e") || !strings.Contains(out, "decided by: ") {
		t.Fatalf("approval show:\n%s", out)
	}
	code, out, _ = runServerCLI(t, getenv, "approval", "list", "-n", ns, "-o", "name", "--pending")
	if code != exitOK || out != "" {
		t.Fatalf("approval list --pending -o name (none pending): exit %d %q", code, out)
	}
	code, out, _ = runServerCLI(t, getenv, "approval", "list", "-n", ns, "-o", "wide")
	if code != exitOK || !strings.Contains(out, "APPROVER") || !strings.Contains(out, "Denied") {
		t.Fatalf("approval list -o wide: exit %d\n%s", code, out)
	}
	var items []approvalListItem
	code, out, _ = runServerCLI(t, getenv, "approval", "list", "-n", ns, "-o", "json")
	if code != exitOK || json.Unmarshal([]byte(out), &items) != nil || len(items) != 2 || items[0].State != apiv1.ApprovalApproved {
		t.Fatalf("approval list -o json: exit %d\n%s", code, out)
	}
	if code, _, _ := runServerCLI(t, getenv, "approval", "list", "-n", ns, "-o", "table.txt"); code != exitUsage {
		t.Fatalf("unknown -o: exit %d", code)
	}
}
