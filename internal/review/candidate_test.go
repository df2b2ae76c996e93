package review

import (
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
)

// recordedReview builds the review the operator would record for reviewed -> live.
func recordedReview(t *testing.T, reviewedDigest string, live []string, removed ...string) *apiv1.McpSnapshotReview {
	t.Helper()
	s := snap(t, "2026-07-28", live...)
	rv := &apiv1.McpSnapshotReview{Spec: apiv1.McpSnapshotReviewSpec{ReviewedSnapshotDigest: reviewedDigest,
		CandidateSnapshotDigest: s.Digest, ProtocolVersion: s.ProtocolVersion, ServerInfo: apiv1.ServerInfo{Name: "acme"}, Removed: removed}}
	rv.Status.Conditions = []metav1.Condition{{Type: apiv1.ReviewConditionRecorded, Status: metav1.ConditionTrue, Reason: apiv1.ReasonCandidateComplete}}
	return rv
}

func TestCandidateOf(t *testing.T) {
	keep := `{"name":"list_files","inputSchema":{"type":"object"}}`
	added := `{"name":"delete_file","inputSchema":{"type":"object"}}`
	doc := reviewedDoc(t, apiv1.EffectRead, keep, `{"name":"gone","inputSchema":{"type":"object"}}`)
	good := func() *apiv1.McpSnapshotReview {
		rv := recordedReview(t, doc.Snapshot.Digest, []string{keep, added}, "gone")
		rv.Spec.Added = []apiv1.ReviewTool{{Name: "delete_file", Descriptor: &runtime.RawExtension{Raw: []byte(added)}}}
		return rv
	}
	cand, err := CandidateOf(doc, good())
	if err != nil || cand.Digest != good().Spec.CandidateSnapshotDigest || len(cand.Tools) != 2 {
		t.Fatalf("CandidateOf = %+v, %v", cand, err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*apiv1.McpSnapshotReview)
		want   error
		refuse string
	}{
		{"another reviewed snapshot", func(rv *apiv1.McpSnapshotReview) { rv.Spec.ReviewedSnapshotDigest = "sha256:other" },
			ErrProfileMismatch, RefusalProfileMismatch},
		{"recorded without descriptors", func(rv *apiv1.McpSnapshotReview) {
			rv.Status.Conditions[0].Status, rv.Status.Conditions[0].Reason = metav1.ConditionFalse, apiv1.ReasonCandidateTooLarge
		}, ErrIncomplete, RefusalIncomplete},
		{"descriptor tampered", func(rv *apiv1.McpSnapshotReview) {
			rv.Spec.Added[0].Descriptor.Raw = []byte(`{"name":"delete_file","inputSchema":{"type":"object"},"x":1}`)
		}, ErrCandidateMismatch, RefusalCandidateMismatch},
		{"removed tool not recorded", func(rv *apiv1.McpSnapshotReview) { rv.Spec.Removed = nil }, ErrCandidateMismatch, RefusalCandidateMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rv := good()
			tc.mutate(rv)
			_, err := CandidateOf(doc, rv)
			var re *Error
			if !errors.Is(err, tc.want) || !errors.As(err, &re) || re.Refusal() != tc.refuse {
				t.Fatalf("err = %v, want %s", err, tc.refuse)
			}
		})
	}
}
