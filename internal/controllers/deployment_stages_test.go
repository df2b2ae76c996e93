package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/b10x/connector-mcp/internal/activation"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/b10x/connector-mcp/api/v1"
)

// The freeze stage dials only when a freeze is due; each row is one reason to freeze, and the
// twin rows (nothing changed, interval not yet passed) are the ones that must not dial.
func TestFreezeDue(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	frozen := func(mut func(*pass)) *pass {
		last := metav1.NewTime(t0)
		p := &pass{now: t0.Add(time.Minute), credHash: "hmac:a", resolved: &activation.Resolved{ProfileDigest: "sha256:p"},
			sd: &v1.ServiceDeployment{ObjectMeta: metav1.ObjectMeta{Generation: 2, UID: "uid"},
				Status: v1.ServiceDeploymentStatus{ObservedGeneration: 2, LastFrozenTime: &last, ProfileDigest: "sha256:p",
					CredentialHash: "hmac:a", ActiveSnapshotDigest: "sha256:s"}}}
		if mut != nil {
			mut(p)
		}
		return p
	}
	r := &DeploymentReconciler{ReverifyInterval: time.Hour}
	for _, c := range []struct {
		name string
		p    *pass
		want bool
	}{
		{"nothing changed, interval not passed (twin)", frozen(nil), false},
		{"never frozen", frozen(func(p *pass) { p.sd.Status.LastFrozenTime = nil }), true},
		{"re-verification requested", frozen(func(p *pass) { p.reverify = true }), true},
		{"spec changed", frozen(func(p *pass) { p.sd.Generation = 3 }), true},
		{"profile changed", frozen(func(p *pass) { p.resolved.ProfileDigest = "sha256:q" }), true},
		{"credential rotated", frozen(func(p *pass) { p.credHash = "hmac:b" }), true},
		{"nothing active nor a candidate", frozen(func(p *pass) { p.sd.Status.ActiveSnapshotDigest = "" }), true},
		{"a candidate is recorded (twin of the row above)", frozen(func(p *pass) {
			p.sd.Status.ActiveSnapshotDigest, p.sd.Status.CandidateSnapshotDigest = "", "sha256:c"
		}), false},
		{"re-verification interval passed", frozen(func(p *pass) { p.now = t0.Add(time.Hour) }), true},
	} {
		if got, _ := r.freezeDue(c.p); got != c.want {
			t.Errorf("%s: freezeDue = %v, want %v", c.name, got, c.want)
		}
	}
	if due, _ := (&DeploymentReconciler{}).freezeDue(frozen(func(p *pass) { p.now = t0.Add(24 * time.Hour) })); due {
		t.Error("without a re-verification interval an unchanged deployment was frozen again")
	}
}

// When no freeze was due, the match stage repeats the recorded outcome of the last one: a
// recorded drift stays a SnapshotDrift refusal with the recorded message (no dial, no review
// write); no recorded drift passes.
func TestMatchWithoutFreezeRepeatsRecordedOutcome(t *testing.T) {
	r := &DeploymentReconciler{}
	drifted := &v1.ServiceDeployment{Status: v1.ServiceDeploymentStatus{CandidateSnapshotDigest: "sha256:c", Drift: &v1.SnapshotDrift{}}}
	meta.SetStatusCondition(&drifted.Status.Conditions, metav1.Condition{Type: v1.ConditionSnapshotMatched, Status: metav1.ConditionFalse,
		Reason: v1.ReasonSnapshotDrift, Message: `the live tool list differs from the reviewed snapshot: added "x"`})
	serr := r.match(context.Background(), &pass{sd: drifted})
	if serr == nil || serr.Condition() != v1.ConditionSnapshotMatched || serr.Reason() != v1.ReasonSnapshotDrift || serr.Transient() ||
		!strings.Contains(serr.Message(), `added "x"`) {
		t.Fatalf("recorded drift: %+v", serr)
	}
	if serr := r.match(context.Background(), &pass{sd: &v1.ServiceDeployment{}}); serr != nil {
		t.Fatalf("twin: no recorded drift refused: %+v", serr)
	}
}
