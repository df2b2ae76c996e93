package envtest

// Resilience story: leader failover between two managers on one lease.

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/mcptest"
)

// leaderLease is the lease timing of the failover story: short, so the story is quick, with the
// same proportions as client-go's defaults (15 s / 10 s / 2 s).
const (
	leaderLeaseDuration = 6 * time.Second
	leaderRenewDeadline = 4 * time.Second
	leaderRetryPeriod   = time.Second
	// leaderElectionID is cmd/manager's lease name.
	leaderElectionID = "connector-mcp.connectors.b10x.io"
)

// withLeaderElection configures a manager as cmd/manager does with --leader-elect (the lease in
// namespace ns, released on cancel), with the story's lease timing.
func withLeaderElection(ns string) func(*ctrl.Options) {
	return func(o *ctrl.Options) {
		o.LeaderElection = true
		o.LeaderElectionID = leaderElectionID
		o.LeaderElectionNamespace = ns
		o.LeaderElectionReleaseOnCancel = true
		o.LeaseDuration = ptr.To(leaderLeaseDuration)
		o.RenewDeadline = ptr.To(leaderRenewDeadline)
		o.RetryPeriod = ptr.To(leaderRetryPeriod)
	}
}

func elected(op *operator) bool {
	select {
	case <-op.mgr.Elected():
		return true
	default:
		return false
	}
}

func leaseHolder(t *testing.T, ns string) string {
	t.Helper()
	l := &coordinationv1.Lease{}
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: leaderElectionID}, l); err != nil {
		t.Fatalf("lease: %v", err)
	}
	return ptr.Deref(l.Spec.HolderIdentity, "")
}

// Two managers with leader election share one lease. While the first leads, the second
// reconciles nothing and writes nothing. The leader is stopped (its context cancelled, as on a
// pod deletion); it releases the lease and the second acquires it (no wait for expiry), takes over the active
// deployment without a write or an event (no second activation), and activates new work, once.
func TestResilienceLeaderFailover(t *testing.T) {
	checkNoLeaks(t)
	ns := newNamespace(t, "resil-leader")
	first := startOperatorWith(t, cfg, []string{ns}, devOptions(), withLeaderElection(ns))
	select {
	case <-first.mgr.Elected():
	case <-time.After(storyTimeout):
		t.Fatal("the first manager was not elected")
	}
	firstHolder := leaseHolder(t, ns)
	second := startOperatorWith(t, cfg, []string{ns}, devOptions(), withLeaderElection(ns))

	_, h := modernServer(mcptest.DefaultTools())
	live := startSwitchable(t, h)
	base := reviewedProfile(t, live.URL)
	makeGrant(t, ns, "all")
	sd := addService(t, ns, "before", base, live.URL+"/before", "all")
	sd = waitObj(t, sd, storyTimeout, "Ready under the first leader", isReady[*apiv1.ServiceDeployment])
	waitEvent(t, ns, "before", "Normal/"+apiv1.ReasonActivated)
	settleWrites(t, first, writeQuiet)
	if elected(second) || second.reconciles(ns+"/before") != 0 || second.writes.Load() != 0 {
		t.Fatalf("the follower acted while the first manager led: elected %v, %d reconciles, %d writes",
			elected(second), second.reconciles(ns+"/before"), second.writes.Load())
	}
	statusBefore := sd.Status.DeepCopy()
	eventsBefore := eventCounts(t, ns, "before")

	// Failover without waiting for the lease to expire: the cancelled leader releases the lease
	// as it stops (release on cancel), so once it has stopped the lease names no holder, or
	// already the follower. (How long the failover took is logged, not asserted.)
	killed := time.Now()
	first.stop()
	if h := leaseHolder(t, ns); h == firstHolder {
		t.Fatalf("the stopped leader still holds the lease (%q): the follower would wait for it to expire", h)
	}
	select {
	case <-second.mgr.Elected():
	case <-time.After(storyTimeout):
		t.Fatalf("the follower did not acquire the released lease within %s", storyTimeout)
	}
	t.Logf("the follower leads %s after the leader's cancellation (lease duration %s)", time.Since(killed).Round(time.Millisecond), leaderLeaseDuration)
	if h := leaseHolder(t, ns); h == firstHolder || h == "" {
		t.Fatalf("lease holder after failover = %q (the first manager was %q)", h, firstHolder)
	}
	// The new leader reconciles the active deployment (its informers' initial list) ...
	if !pollUntil(50*time.Millisecond, storyTimeout, func() bool { return second.reconciles(ns+"/before") != 0 }) {
		t.Fatal("the new leader never reconciled the active deployment")
	}
	// ... and finds nothing to do: no write, no event, the same status.
	if n := settleWrites(t, second, writeQuiet); n != 0 {
		t.Fatalf("the new leader made %d API writes taking over an unchanged deployment", n)
	}
	if err := k8sClient.Get(context.Background(), objKey(sd), sd); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(*statusBefore, sd.Status) {
		t.Fatalf("the takeover changed the status:\nbefore %+v\nafter  %+v", *statusBefore, sd.Status)
	}
	if got := eventCounts(t, ns, "before"); !equality.Semantic.DeepEqual(got, eventsBefore) {
		t.Fatalf("events after the takeover %v, before %v", got, eventsBefore)
	}

	// New work is the new leader's, activated once.
	after := addService(t, ns, "after", base, live.URL+"/after", "all")
	waitObj(t, after, storyTimeout, "Ready under the new leader", isReady[*apiv1.ServiceDeployment])
	waitEvent(t, ns, "after", "Normal/"+apiv1.ReasonActivated)
	settleWrites(t, second, writeQuiet)
	if got := eventCounts(t, ns, "after")["Normal/"+apiv1.ReasonActivated]; got != 1 {
		t.Fatalf("%d Activated events for the deployment created after the failover", got)
	}
	if first.reconciles(ns+"/after") != 0 {
		t.Fatal("the stopped leader reconciled the deployment created after the failover")
	}
}

// The must-fail twin: without leader election two managers both reconcile the same deployment,
// and the follower's counters above say so; the lease is what keeps the second one idle.
func TestResilienceLeaderFailoverTwinWithoutElection(t *testing.T) {
	checkNoLeaks(t)
	ns := newNamespace(t, "resil-noleader")
	a := startOperator(t, ns, devOptions())
	b := startOperator(t, ns, devOptions())
	_, h := modernServer(mcptest.DefaultTools())
	live := startSwitchable(t, h)
	base := reviewedProfile(t, live.URL)
	makeGrant(t, ns, "all")
	sd := addService(t, ns, "svc", base, live.URL+"/svc", "all")
	waitObj(t, sd, storyTimeout, "Ready", isReady[*apiv1.ServiceDeployment])
	if !pollUntil(50*time.Millisecond, storyTimeout, func() bool { return a.reconciles(ns+"/svc") != 0 && b.reconciles(ns+"/svc") != 0 }) {
		t.Fatalf("reconciles without leader election: %d and %d, want both > 0", a.reconciles(ns+"/svc"), b.reconciles(ns+"/svc"))
	}
}
