package envtest

// Resilience story: a registry outage does not deactivate what was verified before it.

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/ociregistry"
)

// A signed pack is verified and its deployment active; then the registry goes away (its server
// is closed: connections refused). The profile is reconciled again (a namespace label change
// re-runs the pack profiles of the namespace) and the deployment is re-verified three times
// (re-verification requests, each a full pass: profile resolution, live freeze, match): the
// verified (digest, policy) stays cached, so the profile's status does not change, the
// deployment stays Ready with the same active snapshot in every status revision the apiserver
// held, and no event is recorded for either. The must-fail twin: a pack signed before the outage but
// never verified cannot be fetched during it, and its profile says so as RegistryUnavailable (a
// transient reason, retried), not as a refusal.
func TestResilienceRegistryOutageKeepsActive(t *testing.T) {
	checkNoLeaks(t)
	ns := newNamespace(t, "resil-registry")
	w := newPackWorld(t, ns)
	o := devOptions()
	w.trustPlatform(&o)
	op := startOperator(t, ns, o)
	ref := w.push(t, "team/demo")
	w.sign(t, ref, packRef)
	// A second reviewed pack (another service: another digest), signed but not yet used.
	later := w.doc.DeepCopy()
	later.Service = apiv1.ServiceIdentity{Ref: "later", ConnectionRef: "later"}
	repo, err := ociregistry.ParseRepository(w.reg.Host + "/team/later")
	if err != nil {
		t.Fatal(err)
	}
	laterRef, err := w.client.Push(context.Background(), repo, []*apiv1.ProfileDocument{later})
	if err != nil {
		t.Fatal(err)
	}
	w.sign(t, laterRef, packRef)
	if laterRef.Digest == ref.Digest {
		t.Fatal("the two packs have one digest")
	}

	prof := packProfile(ns, "demo", ref, mainPolicy())
	mustCreate(t, prof)
	makeGrant(t, ns, "all")
	sd := newDeployment(ns, "demo", "demo", "demo", w.url, w.doc, nil, "all")
	mustCreate(t, sd)
	prof = waitObj(t, prof, storyTimeout, "pack verified", isReady[*apiv1.McpServiceProfile])
	sd = waitObj(t, sd, storyTimeout, "deployment Ready", isReady[*apiv1.ServiceDeployment])
	log := watchDeployment(t, ns, "demo")
	profBefore := prof.Status.DeepCopy()
	// The profile and the deployment are both named demo.
	eventsBefore := eventCounts(t, ns, "demo")
	active := sd.Status.ActiveSnapshotDigest

	// The outage.
	w.reg.Close()

	// The profile reconciler re-runs on a namespace label change.
	profileReads := op.reconciles(profileGetsPrefix + ns + "/demo")
	nsObj := &corev1.Namespace{}
	nsObj.Name = ns
	mutate(t, nsObj, func(n *corev1.Namespace) {
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels["resilience-poke"] = "1"
	})
	if !pollUntil(50*time.Millisecond, storyTimeout, func() bool { return op.reconciles(profileGetsPrefix+ns+"/demo") != profileReads }) {
		t.Fatal("the profile was not reconciled after the namespace label change")
	}
	// Full re-verification passes of the deployment.
	for i := 0; i < 3; i++ {
		at := requestReverify(t, sd)
		sd = waitObj(t, sd, storyTimeout, "re-verified during the outage", func(d *apiv1.ServiceDeployment) bool {
			return frozenSince(d, at)
		})
		if !isReady(sd) || sd.Status.ActiveSnapshotDigest != active {
			t.Fatalf("re-verification %d during the outage: Ready %+v, active %q", i, condOf(sd, apiv1.ConditionReady), sd.Status.ActiveSnapshotDigest)
		}
	}

	// The twin: an uncached pack cannot be fetched, and that is not a refusal.
	laterProf := packProfile(ns, "later", laterRef, mainPolicy())
	mustCreate(t, laterProf)
	laterProf = waitObj(t, laterProf, storyTimeout, "RegistryUnavailable", func(p *apiv1.McpServiceProfile) bool {
		return hasCondition(p, apiv1.ConditionReady, metav1.ConditionFalse, apiv1.ReasonRegistryUnavailable)
	})
	if hasCondition(laterProf, apiv1.ConditionStalled, metav1.ConditionTrue, "") {
		t.Fatalf("an unreachable registry stalled the profile: %+v", laterProf.Status.Conditions)
	}

	prof = waitObj(t, prof, storyTimeout, "profile status read", func(*apiv1.McpServiceProfile) bool { return true })
	if !equality.Semantic.DeepEqual(*profBefore, prof.Status) {
		t.Fatalf("the profile's status changed during the outage:\nbefore %+v\nafter  %+v", *profBefore, prof.Status)
	}
	seen := log.all()
	if len(seen) < 4 {
		t.Fatalf("the watch saw %d status revisions, want the initial one and three re-verifications", len(seen))
	}
	for i, st := range seen {
		ready := meta.FindStatusCondition(st.Conditions, apiv1.ConditionReady)
		if ready == nil || ready.Status != metav1.ConditionTrue || st.ActiveSnapshotDigest != active {
			t.Fatalf("status revision %d during the outage: Ready %+v, active %q", i, ready, st.ActiveSnapshotDigest)
		}
	}
	if after := eventCounts(t, ns, "demo"); !equality.Semantic.DeepEqual(after, eventsBefore) {
		t.Fatalf("events during the outage: before %v, after %v", eventsBefore, after)
	}
	t.Logf("%d status revisions watched; the uncached pack: %+v", len(seen), condOf(laterProf, apiv1.ConditionReady))
}
