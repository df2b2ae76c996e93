package envtest

// The profile's reconstruction stage was renamed from SnapshotMatched to SnapshotReconstructed
// (SnapshotMatched now means only "live equals reviewed", on deployments). A profile whose
// status an older manager wrote must not keep both after an upgrade.

import (
	"context"
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/mcptest"
)

// persistOldConditions writes the status an older manager left on a verified profile: Ready and
// the stage conditions, with the reconstruction stage under its old name.
func persistOldConditions(t *testing.T, prof *apiv1.McpServiceProfile) {
	t.Helper()
	now := metav1.Now()
	for _, c := range []metav1.Condition{
		{Type: apiv1.ConditionReady, Status: metav1.ConditionTrue, Reason: apiv1.ReasonVerified, Message: "verified by an older manager"},
		{Type: apiv1.ConditionSourceVerified, Status: metav1.ConditionTrue, Reason: apiv1.ReasonSucceeded, Message: "SourceVerified passed"},
		{Type: apiv1.ConditionSnapshotMatched, Status: metav1.ConditionTrue, Reason: apiv1.ReasonSucceeded, Message: "SnapshotMatched passed"},
	} {
		c.LastTransitionTime, c.ObservedGeneration = now, prof.Generation
		apimeta.SetStatusCondition(&prof.Status.Conditions, c)
	}
	prof.Status.ObservedGeneration = prof.Generation
	if err := k8sClient.Status().Update(context.Background(), prof); err != nil {
		t.Fatalf("persist the old status: %v", err)
	}
}

// An upgraded manager verifies a profile whose status still carries the old SnapshotMatched: it
// ends with SnapshotReconstructed True and no SnapshotMatched.
func TestStoryUpgradedProfileDropsOldSnapshotMatched(t *testing.T) {
	ns := newNamespace(t, "story-rename")
	_, h := modernServer(mcptest.DefaultTools())
	live := startSwitchable(t, h)
	prof := inlineProfile(ns, "svc", reviewedProfile(t, live.URL))
	mustCreate(t, prof)
	persistOldConditions(t, prof)

	startOperator(t, ns, devOptions())
	prof = waitObj(t, prof, storyTimeout, "SnapshotReconstructed written", func(p *apiv1.McpServiceProfile) bool {
		return hasCondition(p, apiv1.ConditionSnapshotReconstructed, metav1.ConditionTrue, apiv1.ReasonSucceeded)
	})
	if c := apimeta.FindStatusCondition(prof.Status.Conditions, apiv1.ConditionSnapshotMatched); c != nil {
		t.Fatalf("the old SnapshotMatched stayed beside SnapshotReconstructed: %+v", c)
	}
	if !isReady(prof) {
		t.Fatalf("profile not Ready: %s", describeStatus(prof))
	}
}

// Twin: a tampered profile from the same pre-upgrade state is refused under the new name
// (SnapshotReconstructed False, SnapshotDigestMismatch), and the old True SnapshotMatched does not
// survive to contradict it.
func TestStoryUpgradedTamperedProfileRefusedUnderNewName(t *testing.T) {
	ns := newNamespace(t, "story-rename-tamper")
	_, h := modernServer(mcptest.DefaultTools())
	live := startSwitchable(t, h)
	doc := reviewedProfile(t, live.URL)
	doc.Snapshot.Tools[0].Descriptor.Raw = []byte(`{"name":"` + doc.Snapshot.Tools[0].Name + `","description":"tampered","inputSchema":{"type":"object"}}`)
	prof := inlineProfile(ns, "svc", doc)
	mustCreate(t, prof)
	persistOldConditions(t, prof)

	startOperator(t, ns, devOptions())
	prof = waitObj(t, prof, storyTimeout, "SnapshotReconstructed refused", func(p *apiv1.McpServiceProfile) bool {
		return hasCondition(p, apiv1.ConditionSnapshotReconstructed, metav1.ConditionFalse, apiv1.ReasonSnapshotDigestMismatch)
	})
	if c := apimeta.FindStatusCondition(prof.Status.Conditions, apiv1.ConditionSnapshotMatched); c != nil {
		t.Fatalf("the old SnapshotMatched stayed beside the refusal: %+v", c)
	}
	if !hasCondition(prof, apiv1.ConditionReady, metav1.ConditionFalse, apiv1.ReasonSnapshotDigestMismatch) {
		t.Fatalf("Ready = %+v", condOf(prof, apiv1.ConditionReady))
	}
}
