package controllers

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/review"
	"github.com/b10x/connector-mcp/snapshot"
)

func reviewSnap(t *testing.T, proto string, descs ...string) *snapshot.ToolSnapshot {
	t.Helper()
	raws := make([]json.RawMessage, len(descs))
	for i, d := range descs {
		raws[i] = json.RawMessage(d)
	}
	s, err := snapshot.New(proto, snapshot.ServerInfo{Name: "demo", Version: "2"}, raws)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestBuildReviewRecordsCandidate(t *testing.T) {
	reviewed := reviewSnap(t, "2025-11-25",
		`{"name":"echo","description":"Echo","inputSchema":{"type":"object"}}`,
		`{"name":"gone","inputSchema":{"type":"object"}}`)
	live := reviewSnap(t, "2026-07-28",
		`{"name":"echo","description":"Echo, see https://x.example","inputSchema":{"type":"object"}}`,
		`{"name":"new","inputSchema":{"type":"object"}}`)
	now := metav1.NewTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	spec, cond, err := BuildReview("svc", reviewed, live, now)
	if err != nil {
		t.Fatal(err)
	}
	if cond.Status != metav1.ConditionTrue || cond.Reason != v1.ReasonCandidateComplete {
		t.Fatalf("condition = %+v", cond)
	}
	if spec.CandidateSnapshotDigest != live.Digest || spec.ReviewedSnapshotDigest != reviewed.Digest ||
		spec.ProtocolVersion != "2026-07-28" || spec.ReviewedProtocolVersion != "2025-11-25" || spec.ServerInfo.Version != "2" || !spec.FrozenAt.Equal(&now) {
		t.Fatalf("spec header = %+v", spec)
	}
	if len(spec.Added) != 1 || spec.Added[0].Name != "new" || string(spec.Added[0].Descriptor.Raw) != `{"name":"new","inputSchema":{"type":"object"}}` {
		t.Fatalf("added = %+v", spec.Added)
	}
	if len(spec.Changed) != 1 || !strings.Contains(string(spec.Changed[0].Descriptor.Raw), "https://x.example") {
		t.Fatalf("changed = %+v", spec.Changed)
	}
	if len(spec.Removed) != 1 || spec.Removed[0] != "gone" {
		t.Fatalf("removed = %v", spec.Removed)
	}
	want := map[string]int32{review.ClassProtocolChange: 1, review.ClassNewTool: 1, review.ClassRemovedTool: 1, review.ClassTextOnly: 1}
	if len(spec.Classes) != len(want) {
		t.Fatalf("classes = %v, want %v", spec.Classes, want)
	}
	for k, n := range want {
		if spec.Classes[k] != n {
			t.Fatalf("classes = %v, want %v", spec.Classes, want)
		}
	}
	echo := spec.Diff[0]
	if echo.Name != "echo" || len(echo.Changes) != 1 || echo.Changes[0].Path != "/description" ||
		*echo.Changes[0].Old != `"Echo"` || len(echo.Flags) != 1 || echo.Flags[0] != review.FlagURLAdded {
		t.Fatalf("echo diff = %+v", echo)
	}
}

// The size-bound twin: a candidate beyond MaxReviewDescriptorBytes keeps every name, digest and
// class, drops descriptors and changes as a whole, and says so in a named condition.
func TestBuildReviewTooLargeIsNamedNotCut(t *testing.T) {
	reviewed := reviewSnap(t, "2026-07-28", `{"name":"echo","inputSchema":{"type":"object"}}`)
	big := `{"name":"big","description":"` + strings.Repeat("a", v1.MaxReviewDescriptorBytes) + `","inputSchema":{"type":"object"}}`
	live := reviewSnap(t, "2026-07-28", `{"name":"echo","inputSchema":{"type":"object"}}`, big)
	spec, cond, err := BuildReview("svc", reviewed, live, metav1.Now())
	if err != nil {
		t.Fatal(err)
	}
	if cond.Status != metav1.ConditionFalse || cond.Reason != v1.ReasonCandidateTooLarge {
		t.Fatalf("condition = %+v, want CandidateTooLarge", cond)
	}
	if len(spec.Added) != 1 || spec.Added[0].Name != "big" || spec.Added[0].Descriptor != nil || spec.Added[0].Digest == "" {
		t.Fatalf("added = %+v, want the name and digest without the descriptor", spec.Added)
	}
	if spec.Classes[review.ClassNewTool] != 1 || spec.CandidateSnapshotDigest != live.Digest {
		t.Fatalf("spec = %+v", spec)
	}
	if b, _ := json.Marshal(spec); len(b) > v1.MaxReviewDescriptorBytes {
		t.Fatalf("spec is %d bytes", len(b))
	}
}

// noticeRecorder is a DriftNotifier that keeps the notices.
type noticeRecorder struct{ notices []review.DriftNotice }

func (r *noticeRecorder) Notify(n review.DriftNotice) { r.notices = append(r.notices, n) }

// The drift notifier hears of each recorded candidate once: not of a matching freeze, not of the
// same candidate frozen again, and again for a new candidate.
func TestRecordedReviewNotifiesOncePerCandidate(t *testing.T) {
	_, objs := world(t)
	h := newHarness(t, objs...)
	rec := &noticeRecorder{}
	h.dep.DriftNotifier = rec
	h.activate()
	if len(rec.notices) != 0 {
		t.Fatalf("a matching freeze notified %+v", rec.notices)
	}
	live := liveSnapshot(t, "2026-07-28", toolAx, toolB, toolC)
	h.freezer.set(live, nil)
	h.clock.SetTime(h.clock.Now().Add(2 * time.Hour))
	h.reconcileDeployment("sd")
	if len(rec.notices) != 1 {
		t.Fatalf("notices after drift = %d, want 1", len(rec.notices))
	}
	n := rec.notices[0]
	if n.Namespace != ns || n.Deployment != "sd" || n.CandidateSnapshotDigest != live.Digest || n.Recorded != v1.ReasonCandidateComplete ||
		n.Classes[review.ClassNewTool] != 1 || n.ReviewedSnapshotDigest == "" {
		t.Fatalf("notice = %+v", n)
	}
	h.clock.SetTime(h.clock.Now().Add(2 * time.Hour))
	h.reconcileDeployment("sd")
	if len(rec.notices) != 1 {
		t.Fatalf("the same candidate frozen again notified again (%d notices)", len(rec.notices))
	}
	h.freezer.set(liveSnapshot(t, "2026-07-28", toolAx, toolB), nil)
	h.clock.SetTime(h.clock.Now().Add(2 * time.Hour))
	h.reconcileDeployment("sd")
	if len(rec.notices) != 2 || rec.notices[1].Classes[review.ClassNewTool] != 0 {
		t.Fatalf("a new candidate: notices = %+v, want a second one without new_tool", rec.notices)
	}
}
