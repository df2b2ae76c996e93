package controllers

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/b10x/connector-mcp/internal/activation"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	v1 "github.com/b10x/connector-mcp/api/v1"
)

func indexed(name, provider, url string, created time.Time, ops ...string) *v1.ServiceDeployment {
	sd := &v1.ServiceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Generation: 1,
		CreationTimestamp: metav1.NewTime(created)},
		Spec: v1.ServiceDeploymentSpec{ProviderID: provider, ProfileRef: v1.LocalObjectReference{Name: name}, MCPConnection: v1.MCPConnection{URL: url}}}
	for _, o := range ops {
		sd.Spec.Operations = append(sd.Spec.Operations, v1.OperationBinding{OperationRef: o})
	}
	return sd
}

func namesOf(ns []types.NamespacedName) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Name)
	}
	slices.Sort(out)
	return out
}

// A change re-enqueues only the later deployments that share a full claim key with the old or
// the new claim; a status-only update re-enqueues nothing.
func TestClaimIndexRequeuesSharersOnly(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var x claimIndex
	a := indexed("a", "prov-a", "https://a.example.com/mcp", t0)
	b := indexed("b", "prov-a", "https://b.example.com/mcp", t0.Add(time.Minute))       // shares a's provider
	c := indexed("c", "prov-c", "https://a.example.com:443/mcp", t0.Add(2*time.Minute)) // shares a's authority
	d := indexed("d", "prov-d", "https://d.example.com/mcp", t0.Add(3*time.Minute))     // shares nothing
	for _, sd := range []*v1.ServiceDeployment{a, b, c, d} {
		x.observe(sd)
	}
	if got := namesOf(x.observe(a)); got != nil {
		t.Fatalf("an unchanged claim re-enqueued %v", got)
	}
	status := a.DeepCopy()
	status.Status.ObservedGeneration = 1
	if got := namesOf(x.observe(status)); got != nil {
		t.Fatalf("a status update re-enqueued %v", got)
	}
	// a moves to d's endpoint: b (old provider), c (old authority) and d (new authority, later).
	moved := a.DeepCopy()
	moved.Generation, moved.Spec.MCPConnection.URL = 2, "https://d.example.com/mcp"
	if got := namesOf(x.observe(moved)); !slices.Equal(got, []string{"b", "c", "d"}) {
		t.Fatalf("a's move re-enqueued %v, want [b c d]", got)
	}
	// d changes its provider to one nobody holds: only later sharers count, and a came first.
	d2 := d.DeepCopy()
	d2.Generation, d2.Spec.ProviderID = 2, "prov-d2"
	if got := namesOf(x.observe(d2)); got != nil {
		t.Fatalf("d's change re-enqueued %v, want none (a is earlier)", got)
	}
	if got := namesOf(x.forget(client.ObjectKeyFromObject(a))); !slices.Equal(got, []string{"b", "d"}) {
		t.Fatalf("a's deletion re-enqueued %v, want [b d]", got)
	}
	gone := b.DeepCopy()
	now := metav1.NewTime(t0)
	gone.DeletionTimestamp = &now
	x.observe(gone)
	if x.size() != 2 {
		t.Fatalf("a deployment being deleted still holds a claim: %d entries", x.size())
	}
}

// Operation claims are keyed by the full "connectionRef/operationRef": deployments sharing
// operation names under other Connections share no key, so a pass reads none of their claims.
func TestClaimIndexFullOperationKey(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var x claimIndex
	x.observe(indexed("a", "pa", "https://a.example.com/mcp", t0))
	x.observe(indexed("b", "pb", "https://b.example.com/mcp", t0.Add(time.Minute)))
	x.mu.Lock()
	for n, ops := range map[string][]string{"a": {"conn-a/op-a", "conn-a/op-b"}, "b": {"conn-b/op-a"}} {
		e := x.entries[types.NamespacedName{Namespace: "ns", Name: n}]
		x.link(types.NamespacedName{Namespace: "ns", Name: n}, &e.claim, false)
		e.claim.Operations = ops
		x.link(types.NamespacedName{Namespace: "ns", Name: n}, &e.claim, true)
	}
	x.mu.Unlock()
	later := bundleClaim{Key: "ns/c", Created: metav1.NewTime(t0.Add(time.Hour)), Provider: "pc", Authority: "https://c.example.com:443/mcp",
		Operations: []string{"conn-c/op-a", "conn-c/op-b"}}
	if got := x.earlierSharing(later); len(got) != 0 {
		t.Fatalf("claims read for unrelated deployments: %+v", got)
	}
	later.Operations = []string{"conn-a/op-b"}
	got := x.earlierSharing(later)
	if len(got) != 1 || got[0].Key != "ns/a" {
		t.Fatalf("claims sharing conn-a/op-b = %+v, want ns/a", got)
	}
	if serr := findCollision(later, got); serr == nil || serr.Reason() != v1.ReasonOperationCollision || !strings.Contains(serr.Message(), `"conn-a/op-b" is held by ServiceDeployment ns/a`) {
		t.Fatalf("findCollision = %+v", serr)
	}
}

// Another deployment's claim is derived once per (generation, profile): passes over an
// unchanged cluster derive nothing; a profile event derives the claims of its deployments only.
func TestClaimDerivedOncePerGenerationAndProfile(t *testing.T) {
	_, objs := world(t)
	for _, o := range objs {
		if r, ok := o.(*rbacv1.Role); ok {
			r.Rules[0].ResourceNames = nil
		}
	}
	first := sdOf(objs)
	var extra []client.Object
	for _, n := range []string{"sd2", "sd3"} {
		o := first.DeepCopy()
		o.Name, o.UID = n, types.UID(n+"-uid")
		o.CreationTimestamp = metav1.NewTime(first.CreationTimestamp.Add(time.Minute))
		o.Spec.ProviderID, o.Spec.MCPConnection.URL = "prov-"+n, "https://"+n+".example.com/mcp"
		extra = append(extra, o)
	}
	h := newHarness(t, append(objs, extra...)...)
	h.activate()
	if got := h.dep.claims.derivations; got != 3 {
		t.Fatalf("first pass derived %d claims, want 3 (every deployment once)", got)
	}
	h.reconcileDeployment("sd2")
	h.reconcileDeployment("sd")
	if got := h.dep.claims.derivations; got != 3 {
		t.Fatalf("passes over an unchanged cluster derived %d claims in all, want still 3", got)
	}
	if c := cond(h.deployment("sd2").Status.Conditions, v1.ConditionBound); c.Reason != v1.ReasonOperationCollision {
		t.Fatalf("sd2 Bound = %+v", c)
	}
	// The profile changes: its deployments are derived again (all three reference it).
	h.dep.byProfile(context.Background(), h.profile("svc"))
	h.reconcileProfile("svc")
	h.reconcileDeployment("sd")
	if got := h.dep.claims.derivations; got != 3 {
		// same generation and digest: the memo holds, nothing is resolved again
		t.Fatalf("an unchanged profile event re-derived: %d", got)
	}
	p := h.profile("svc")
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == v1.ConditionReady {
			p.Status.Conditions[i].Status = metav1.ConditionFalse
		}
	}
	if err := h.c.Status().Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	h.dep.byProfile(context.Background(), p)
	h.reconcileDeployment("sd3")
	if got := h.dep.claims.derivations; got != 6 {
		t.Fatalf("a changed profile derived %d claims in all, want 6 (its three deployments again)", got)
	}
	// Its operations no longer count (profile not Ready): sd2 holds nothing against sd3.
	if got := h.dep.claims.earlierSharing(bundleClaim{Key: "team/sd3", Created: metav1.NewTime(time.Now()), Provider: "prov-sd3",
		Operations: []string{"conn/op-a"}}); len(got) != 0 {
		t.Fatalf("claims of a deployment whose profile is not Ready: %+v", got)
	}
}

// Retries back off exponentially up to the cap, jittered into [d/2, d).
func TestRetryBackoff(t *testing.T) {
	base, capd := 2*time.Second, 30*time.Second
	for _, tc := range []struct {
		failures int
		u        float64
		want     time.Duration
	}{
		{1, 0, time.Second}, {1, 0.5, 1500 * time.Millisecond}, {2, 0, 2 * time.Second}, {3, 0, 4 * time.Second},
		{5, 0, 15 * time.Second}, {6, 0, 15 * time.Second}, {60, 0.999999, 30*time.Second - 15*time.Microsecond},
		{1, 1.5, time.Second}, // out-of-range draw: no jitter
	} {
		if got := retryBackoff(base, capd, tc.failures, tc.u); got != tc.want {
			t.Errorf("retryBackoff(%d, %v) = %v, want %v", tc.failures, tc.u, got, tc.want)
		}
	}
}

// Many deployments failing on one dead server draw different delays (no lockstep); one
// deployment's delay grows with its failures, and resets after a pass without a failure.
func TestRetryJitterSpreadsDeployments(t *testing.T) {
	seen := map[time.Duration]bool{}
	for i := range 100 {
		uid := types.UID("uid-" + string(rune('a'+i%26)) + string(rune('a'+i/26)))
		d := retryBackoff(10*time.Second, time.Hour, 3, retryJitter(uid, 3))
		if d < 20*time.Second || d >= 40*time.Second {
			t.Fatalf("delay %v outside [20s, 40s)", d)
		}
		seen[d] = true
	}
	if len(seen) < 90 {
		t.Fatalf("100 deployments drew only %d distinct delays: they retry in lockstep", len(seen))
	}
	if retryJitter("x", 1) == retryJitter("x", 2) {
		t.Fatal("one deployment draws the same jitter on every attempt")
	}
	var c retryCounter
	n := types.NamespacedName{Namespace: "ns", Name: "a"}
	if c.next(n) != 1 || c.next(n) != 2 {
		t.Fatal("failures are not counted")
	}
	c.reset(n)
	if c.next(n) != 1 {
		t.Fatal("a reset does not restart the backoff")
	}
}

// A new deployment whose profile was not reconciled yet writes nothing until the profile's
// first status, so it reaches Ready with one write; the twins (a profile nobody reconciled for
// longer than profileUnseenGrace, or one in another shard) write ProfileNotReady at once.
func TestNewDeploymentWaitsForUnseenProfileWithoutWriting(t *testing.T) {
	for _, tc := range []struct {
		name    string
		age     time.Duration
		shard   string
		waits   bool
		profile map[string]string
	}{
		{name: "young profile in this shard", age: time.Second, waits: true},
		{name: "profile unseen for longer than the grace", age: profileUnseenGrace + time.Second},
		{name: "profile in another shard", age: time.Second, shard: ShardLabel + "=shard1", profile: map[string]string{ShardLabel: "shard2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, objs := world(t)
			h := newHarness(t)
			for _, o := range objs {
				if p, ok := o.(*v1.McpServiceProfile); ok {
					p.CreationTimestamp = metav1.NewTime(h.clock.Now().Add(-tc.age))
					p.Labels = tc.profile
				}
				if sd, ok := o.(*v1.ServiceDeployment); ok && tc.shard != "" {
					sd.Labels = map[string]string{ShardLabel: "shard1"}
				}
				if err := h.c.Create(context.Background(), o); err != nil {
					t.Fatal(err)
				}
			}
			if tc.shard != "" {
				sel, err := labels.Parse(tc.shard)
				if err != nil {
					t.Fatal(err)
				}
				h.dep.Shard = sel
			}
			h.writes = 0
			res := h.reconcileDeployment("sd")
			sd := h.deployment("sd")
			if !tc.waits {
				if c := cond(sd.Status.Conditions, v1.ConditionReady); c.Reason != v1.ReasonProfileNotReady || h.writes != 1 {
					t.Fatalf("Ready = %+v after %d writes, want ProfileNotReady written", c, h.writes)
				}
				return
			}
			if h.writes != 0 || len(sd.Status.Conditions) != 0 || res.RequeueAfter <= 0 {
				t.Fatalf("%d writes, conditions %+v, requeue %v: want no write and a retry", h.writes, sd.Status.Conditions, res.RequeueAfter)
			}
			h.activate()
			if h.writes != 2 {
				t.Fatalf("%d writes to Ready, want 2 (the profile's status and the deployment's)", h.writes)
			}
		})
	}
}

// A pass that reads a cache not yet showing the status the previous pass wrote computes that
// status again: it writes nothing and emits no second event. The memory is used once: the pass
// after writes again if the cache still differs (someone else changed the status).
func TestStaleCacheRepeatWritesNothing(t *testing.T) {
	_, objs := world(t)
	h := newHarness(t, objs...)
	h.activate()
	ready := h.deployment("sd")
	before, events := h.writes, len(h.events.Events)
	// The cache "loses" the write: status as before the pass.
	stale := ready.DeepCopy()
	stale.Status = v1.ServiceDeploymentStatus{}
	if err := h.c.Status().Update(context.Background(), stale); err != nil {
		t.Fatal(err)
	}
	h.writes = before
	h.dep.written.record(ready) // as the activating pass left it
	h.clock.SetTime(h.clock.Now().Add(3 * time.Second))
	h.reconcileDeployment("sd")
	if h.writes != before || len(h.events.Events) != events {
		t.Fatalf("a stale repeat wrote %d times and emitted %d events", h.writes-before, len(h.events.Events)-events)
	}
	// Twin: the next pass (memory used) writes the status again.
	h.reconcileDeployment("sd")
	if h.writes != before+1 || cond(h.deployment("sd").Status.Conditions, v1.ConditionReady).Status != metav1.ConditionTrue {
		t.Fatalf("the pass after a stale repeat wrote %d times; Ready %+v", h.writes-before, cond(h.deployment("sd").Status.Conditions, v1.ConditionReady))
	}
}

// failingVerifier answers every pack with a transient error (a registry outage).
type failingVerifier struct{}

func (failingVerifier) VerifyPack(context.Context, activation.VerifyRequest) (*activation.VerifiedSource, error) {
	return nil, errors.New("dial tcp: connection refused")
}

// A profile whose registry is down retries with the same exponential, jittered backoff as a
// deployment (no fixed interval); a verified profile is not retried at all.
func TestProfileRegistryOutageBacksOff(t *testing.T) {
	prof := &v1.McpServiceProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "svc", UID: "prof-uid", Generation: 1},
		Spec: v1.McpServiceProfileSpec{Source: v1.ProfileSource{OCI: &v1.OCISource{Ref: "registry.example/p@sha256:" + strings.Repeat("ab", 32)}}}}
	h := newHarness(t, prof)
	h.prof.Resolver.Verifier = failingVerifier{}
	first := h.reconcileProfile("svc")
	second := h.reconcileProfile("svc")
	if first.RequeueAfter < 2500*time.Millisecond || first.RequeueAfter >= 5*time.Second {
		t.Fatalf("first retry after %v, want within [2.5s, 5s)", first.RequeueAfter)
	}
	if second.RequeueAfter < 5*time.Second || second.RequeueAfter >= 10*time.Second {
		t.Fatalf("second retry after %v, want within [5s, 10s)", second.RequeueAfter)
	}
	if c := cond(h.profile("svc").Status.Conditions, v1.ConditionReady); c.Reason != v1.ReasonRegistryUnavailable {
		t.Fatalf("Ready = %+v", c)
	}
}

// When a derivation gives a deployment new keys (its profile became Ready), the later
// deployments sharing them are handed to the controller's queue through the claim channel;
// with the manager stopping (context done) and nobody draining it, the hand-off gives up
// instead of blocking the pass.
func TestDerivationRequeuesLaterSharers(t *testing.T) {
	_, objs := world(t)
	first := sdOf(objs)
	second := first.DeepCopy()
	second.Name, second.UID = "sd2", "sd2-uid"
	second.CreationTimestamp = metav1.NewTime(first.CreationTimestamp.Add(time.Minute))
	second.Spec.ProviderID, second.Spec.MCPConnection.URL = "prov2", "https://other.example.com/mcp"
	second.Spec.ProfileRef.Name = "svc2" // the same Connection under a profile of its own
	var prof2 *v1.McpServiceProfile
	for _, o := range objs {
		if p, ok := o.(*v1.McpServiceProfile); ok {
			prof2 = p.DeepCopy()
		}
	}
	prof2.Name, prof2.UID = "svc2", "prof2-uid"
	h := newHarness(t, append(objs, second, prof2)...)
	ctx := context.Background()
	if err := h.dep.observeAll(ctx); err != nil {
		t.Fatal(err)
	}
	h.reconcileProfile("svc2") // sd2's profile first: sd2 holds the operation keys, sd none yet
	h.dep.byProfile(ctx, h.profile("svc2"))
	if err := h.dep.deriveClaims(ctx); err != nil {
		t.Fatal(err)
	}
	h.reconcileProfile("svc")
	h.dep.byProfile(ctx, h.profile("svc"))
	h.dep.claimEvents = make(chan event.TypedGenericEvent[*v1.ServiceDeployment], 10)
	if err := h.dep.deriveClaims(ctx); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(h.dep.claimEvents) > 0 {
		got = append(got, (<-h.dep.claimEvents).Object.Name)
	}
	if !slices.Contains(got, "sd2") || slices.Contains(got, "sd") {
		t.Fatalf("requeued %v, want sd2 (later, sharing the new operation keys) and not sd", got)
	}
	// Twin: nobody drains the channel and the context is done: the pass is not blocked.
	h.dep.claimEvents = make(chan event.TypedGenericEvent[*v1.ServiceDeployment])
	stopped, cancel := context.WithCancel(ctx)
	cancel()
	done := make(chan struct{})
	go func() {
		h.dep.requeue(stopped, []types.NamespacedName{{Namespace: ns, Name: "sd2"}})
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("requeue blocked on a channel nobody drains after the context ended")
	}
}
