package controllers

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/b10x/connector-mcp/internal/activation"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/writecount"
	"github.com/b10x/connector-mcp/snapshot"
)

// fakeFreezer answers with a configurable live snapshot and counts freezes.
type fakeFreezer struct {
	mu    sync.Mutex
	live  *snapshot.ToolSnapshot
	err   error
	calls int
	last  activation.FreezeRequest
}

func (f *fakeFreezer) Freeze(_ context.Context, req activation.FreezeRequest) (*snapshot.ToolSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.last = req
	return f.live, f.err
}

func (f *fakeFreezer) set(live *snapshot.ToolSnapshot, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.live, f.err = live, err
}

func (f *fakeFreezer) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// harness is a fake API server with a write counter, both reconcilers and a fake clock.
type harness struct {
	t       *testing.T
	c       client.Client
	writes  int
	clock   *clocktesting.FakePassiveClock
	freezer *fakeFreezer
	events  *events.FakeRecorder
	prof    *ProfileReconciler
	dep     *DeploymentReconciler
}

const ns = "team"

func newHarness(t *testing.T, objs ...client.Object) *harness {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, clock: clocktesting.NewFakePassiveClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)),
		freezer: &fakeFreezer{}, events: events.NewFakeRecorder(100)}
	count := func() { h.writes++ }
	h.c = fake.NewClientBuilder().WithScheme(scheme).
		WithStatusSubresource(&v1.McpServiceProfile{}, &v1.ServiceDeployment{}).
		WithIndex(&v1.ServiceDeployment{}, indexProfileRef, profileRefIndex).
		WithObjects(objs...).
		WithInterceptorFuncs(writecount.Funcs(count)).Build()
	resolver := &activation.Resolver{}
	h.prof = &ProfileReconciler{Client: h.c, Events: h.events, Resolver: resolver, Clock: h.clock, RetryInterval: 5 * time.Second}
	h.dep = &DeploymentReconciler{Client: h.c, SecretReader: h.c, CredentialHashKey: testHashKey, Events: h.events, Resolver: resolver, Freezer: h.freezer,
		Clock: h.clock, ReverifyInterval: time.Hour, ReverifyJitter: 0.1, RetryInterval: 5 * time.Second, FreezeTimeout: time.Second, Metrics: NewMetrics()}
	return h
}

// world returns a reviewed inline profile, a grant (Role + RoleBinding), a credential Secret and
// a deployment binding every operation, with the live server answering the reviewed tools.
func world(t *testing.T) (*v1.ProfileDocument, []client.Object) {
	doc := testDoc(t, "2026-07-28", toolA, toolB)
	created := metav1.NewTime(time.Date(2026, 11, 30, 11, 0, 0, 0, time.UTC))
	prof := &v1.McpServiceProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "svc", UID: "prof-uid", Generation: 1},
		Spec: v1.McpServiceProfileSpec{Source: v1.ProfileSource{Inline: doc.DeepCopy()}}}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invoker"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"invoke"}, APIGroups: []string{"connectors.b10x.io"}, Resources: []string{"servicedeployments"}, ResourceNames: []string{"sd"}}}}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "grant"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "invoker"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "agent", Namespace: ns}}}
	secret := &corev1.Secret{ObjectMeta: optedIn(ns, "tok"), Data: map[string][]byte{"token": []byte("s3cret")}}
	cred := &v1.CredentialRef{Name: "tok", Key: "token"}
	sd := &v1.ServiceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sd", UID: "sd-uid", Generation: 1, CreationTimestamp: created},
		Spec: v1.ServiceDeploymentSpec{ProfileRef: v1.LocalObjectReference{Name: "svc"}, ProviderID: "prov",
			MCPConnection: v1.MCPConnection{URL: "https://mcp.example.com/mcp", CredentialRef: cred}}}
	for _, op := range doc.Operations {
		sd.Spec.Operations = append(sd.Spec.Operations, v1.OperationBinding{OperationRef: op.OperationRef, EndpointRef: "mcp_connection",
			CredentialRef: cred.DeepCopy(), GrantRefs: []string{"grant"}, Expose: op.OperationRef == "op-a"})
	}
	return doc, []client.Object{prof, role, rb, secret, sd}
}

func (h *harness) reconcileProfile(name string) ctrl.Result {
	h.t.Helper()
	res, err := h.prof.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
	if err != nil {
		h.t.Fatal(err)
	}
	return res
}

func (h *harness) reconcileDeployment(name string) ctrl.Result {
	h.t.Helper()
	res, err := h.dep.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
	if err != nil {
		h.t.Fatal(err)
	}
	return res
}

func (h *harness) deployment(name string) *v1.ServiceDeployment {
	h.t.Helper()
	sd := &v1.ServiceDeployment{}
	if err := h.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, sd); err != nil {
		h.t.Fatal(err)
	}
	return sd
}

func (h *harness) profile(name string) *v1.McpServiceProfile {
	h.t.Helper()
	p := &v1.McpServiceProfile{}
	if err := h.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, p); err != nil {
		h.t.Fatal(err)
	}
	return p
}

// kstatusOf computes the kstatus a GitOps tool would read.
func kstatusOf(t *testing.T, o client.Object) status.Status {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		t.Fatal(err)
	}
	res, err := status.Compute(&unstructured.Unstructured{Object: m})
	if err != nil {
		t.Fatal(err)
	}
	return res.Status
}

func cond(conds []metav1.Condition, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(conds, typ); c != nil {
		return *c
	}
	return metav1.Condition{Type: typ, Status: "Absent"}
}

func (h *harness) activate() {
	h.t.Helper()
	h.freezer.set(liveSnapshot(h.t, "2026-07-28", toolB, toolA2), nil)
	h.reconcileProfile("svc")
	h.reconcileDeployment("sd")
	sd := h.deployment("sd")
	if c := cond(sd.Status.Conditions, v1.ConditionReady); c.Status != metav1.ConditionTrue || c.Reason != v1.ReasonActivated {
		h.t.Fatalf("Ready = %+v; conditions %+v", c, sd.Status.Conditions)
	}
}

func TestActivationAndNoOpReconcile(t *testing.T) {
	doc, objs := world(t)
	h := newHarness(t, objs...)
	h.activate()

	p := h.profile("svc")
	if p.Status.SnapshotDigest != doc.Snapshot.Digest || !strings.HasPrefix(p.Status.ProfileDigest, "sha256:") || p.Status.ObservedGeneration != 1 {
		t.Fatalf("profile status = %+v", p.Status)
	}
	if got := kstatusOf(t, p); got != status.CurrentStatus {
		t.Fatalf("profile kstatus = %s", got)
	}
	sd := h.deployment("sd")
	st := sd.Status
	if st.ActiveSnapshotDigest != doc.Snapshot.Digest || st.ExposedOperations != 1 || st.ObservedGeneration != 1 ||
		st.ProfileDigest != p.Status.ProfileDigest || st.CredentialHash != credentialHash(testHashKey, "sd-uid", []byte("s3cret")) || st.LastFrozenTime == nil {
		t.Fatalf("deployment status = %+v", st)
	}
	for _, typ := range deploymentConditions {
		if c := cond(st.Conditions, typ); c.Status != metav1.ConditionTrue {
			t.Fatalf("%s = %+v", typ, c)
		}
	}
	if c := cond(st.Conditions, v1.ConditionReconciling); c.Status != "Absent" {
		t.Fatalf("Reconciling = %+v", c)
	}
	if got := kstatusOf(t, sd); got != status.CurrentStatus {
		t.Fatalf("deployment kstatus = %s", got)
	}
	if h.freezer.last.Credential == nil || h.freezer.last.URL != "https://mcp.example.com/mcp" || h.freezer.last.Namespace != ns {
		t.Fatalf("freeze request = %+v", h.freezer.last)
	}
	if e := <-h.events.Events; !strings.Contains(e, "Normal Verified") {
		t.Fatalf("event %q", e)
	}
	if e := <-h.events.Events; !strings.Contains(e, "Normal Activated") {
		t.Fatalf("event %q", e)
	}

	// A second pass over unchanged objects makes zero API writes, freezes nothing, emits nothing.
	writes, freezes := h.writes, h.freezer.count()
	h.reconcileProfile("svc")
	res := h.reconcileDeployment("sd")
	if h.writes != writes || h.freezer.count() != freezes {
		t.Fatalf("no-op pass: %d writes, %d freezes", h.writes-writes, h.freezer.count()-freezes)
	}
	if len(h.events.Events) != 0 {
		t.Fatalf("no-op pass emitted %q", <-h.events.Events)
	}
	sd = h.deployment("sd")
	want := nextVerification(sd.Status.LastFrozenTime.Time, time.Hour, 0.1, string(sd.UID)).Sub(h.clock.Now())
	if res.RequeueAfter != want || res.RequeueAfter < 6*time.Minute-time.Second || res.RequeueAfter > 66*time.Minute {
		t.Fatalf("requeue after %v, want the deployment's next point in the re-verification interval (%v)", res.RequeueAfter, want)
	}

	// Re-verification when due freezes again; an unchanged server changes only lastFrozenTime.
	h.clock.SetTime(h.clock.Now().Add(2 * time.Hour))
	writes = h.writes
	h.reconcileDeployment("sd")
	if h.freezer.count() != freezes+1 || h.writes != writes+1 {
		t.Fatalf("re-verification: %d freezes, %d writes", h.freezer.count()-freezes, h.writes-writes)
	}
	if c := cond(h.deployment("sd").Status.Conditions, v1.ConditionReady); c.Status != metav1.ConditionTrue {
		t.Fatalf("Ready after re-verification = %+v", c)
	}
}

func TestDriftRefusesWithDiffAndRecoversWithNewProfile(t *testing.T) {
	doc, objs := world(t)
	h := newHarness(t, objs...)
	h.activate()

	// The live server changes tool a and adds c.
	h.freezer.set(liveSnapshot(t, "2026-07-28", toolAx, toolB, toolC), nil)
	h.clock.SetTime(h.clock.Now().Add(2 * time.Hour))
	h.reconcileDeployment("sd")
	sd := h.deployment("sd")
	st := sd.Status
	if c := cond(st.Conditions, v1.ConditionReady); c.Status != metav1.ConditionFalse || c.Reason != v1.ReasonSnapshotDrift {
		t.Fatalf("Ready = %+v", c)
	}
	if c := cond(st.Conditions, v1.ConditionStalled); c.Status != metav1.ConditionTrue || c.Reason != v1.ReasonSnapshotDrift {
		t.Fatalf("Stalled = %+v", c)
	}
	if c := cond(st.Conditions, v1.ConditionSnapshotMatched); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, `changed "a"`) || !strings.Contains(c.Message, `added "c"`) {
		t.Fatalf("SnapshotMatched = %+v", c)
	}
	live := liveSnapshot(t, "2026-07-28", toolAx, toolB, toolC)
	if st.ActiveSnapshotDigest != "" || st.CandidateSnapshotDigest != live.Digest || st.ExposedOperations != 0 {
		t.Fatalf("status = %+v", st)
	}
	if st.Drift == nil || len(st.Drift.Added) != 1 || st.Drift.Added[0].Name != "c" || len(st.Drift.Changed) != 1 ||
		st.Drift.Changed[0].From != digestOf(t, toolA) || st.Drift.Changed[0].To != digestOf(t, toolAx) || len(st.Drift.Removed) != 0 {
		t.Fatalf("drift = %+v", st.Drift)
	}
	if got := kstatusOf(t, sd); got != status.FailedStatus {
		t.Fatalf("kstatus = %s, want Failed", got)
	}
	drained := strings.Join(drain(h.events), "\n")
	if !strings.Contains(drained, "Warning SnapshotDrift") {
		t.Fatalf("events %q", drained)
	}

	// The refusal is stable: a second pass writes nothing.
	writes := h.writes
	h.reconcileDeployment("sd")
	if h.writes != writes {
		t.Fatalf("drifted no-op pass wrote %d times", h.writes-writes)
	}

	// A new reviewed profile that matches the live server re-activates without manual steps.
	newDoc := testDoc(t, "2026-07-28", toolAx, toolB, toolC)
	newDoc.Service = doc.Service
	p := h.profile("svc")
	p.Spec.Source.Inline = newDoc
	p.Generation = 2
	if err := h.c.Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	h.reconcileProfile("svc")
	sd = h.deployment("sd")
	sd.Spec.Operations = append(sd.Spec.Operations, v1.OperationBinding{OperationRef: "op-c", EndpointRef: "mcp_connection",
		CredentialRef: sd.Spec.MCPConnection.CredentialRef.DeepCopy(), GrantRefs: []string{"grant"}})
	sd.Generation = 2
	if err := h.c.Update(context.Background(), sd); err != nil {
		t.Fatal(err)
	}
	h.reconcileDeployment("sd")
	st = h.deployment("sd").Status
	if c := cond(st.Conditions, v1.ConditionReady); c.Status != metav1.ConditionTrue || st.ActiveSnapshotDigest != live.Digest || st.Drift != nil || st.CandidateSnapshotDigest != "" || st.ObservedGeneration != 2 {
		t.Fatalf("after new profile: Ready %+v, status %+v", c, st)
	}
}

func drain(r *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestServerUnreachableRetriesWithoutStalling(t *testing.T) {
	_, objs := world(t)
	h := newHarness(t, objs...)
	h.freezer.set(nil, errors.New("dial tcp 10.0.0.1:443: connect: connection refused"))
	h.reconcileProfile("svc")
	res := h.reconcileDeployment("sd")
	sd := h.deployment("sd")
	st := sd.Status
	if c := cond(st.Conditions, v1.ConditionReady); c.Status != metav1.ConditionFalse || c.Reason != v1.ReasonServerUnreachable || strings.Contains(c.Message, "10.0.0.1") {
		t.Fatalf("Ready = %+v", c)
	}
	if c := cond(st.Conditions, v1.ConditionReconciling); c.Status != metav1.ConditionTrue {
		t.Fatalf("Reconciling = %+v", c)
	}
	if c := cond(st.Conditions, v1.ConditionStalled); c.Status != "Absent" {
		t.Fatalf("Stalled = %+v", c)
	}
	// The retry backs off from RetryInterval (5 s), jittered into [d/2, d).
	if st.ObservedGeneration != 0 || res.RequeueAfter < 2500*time.Millisecond || res.RequeueAfter >= 5*time.Second {
		t.Fatalf("observedGeneration %d, requeue %v", st.ObservedGeneration, res.RequeueAfter)
	}
	if again := h.reconcileDeployment("sd"); again.RequeueAfter < 5*time.Second || again.RequeueAfter >= 10*time.Second {
		t.Fatalf("second retry after %v, want within [5s, 10s)", again.RequeueAfter)
	}
	if got := kstatusOf(t, sd); got != status.InProgressStatus {
		t.Fatalf("kstatus = %s", got)
	}
	// The server comes back: the retry activates.
	h.freezer.set(liveSnapshot(t, "2026-07-28", toolA, toolB), nil)
	h.reconcileDeployment("sd")
	if c := cond(h.deployment("sd").Status.Conditions, v1.ConditionReady); c.Status != metav1.ConditionTrue {
		t.Fatalf("Ready after retry = %+v", c)
	}
}

func TestCredentialMissingAndRotated(t *testing.T) {
	_, objs := world(t)
	var kept []client.Object
	for _, o := range objs {
		if _, ok := o.(*corev1.Secret); !ok {
			kept = append(kept, o)
		}
	}
	h := newHarness(t, kept...)
	h.freezer.set(liveSnapshot(t, "2026-07-28", toolA, toolB), nil)
	h.reconcileProfile("svc")
	h.reconcileDeployment("sd")
	st := h.deployment("sd").Status
	if c := cond(st.Conditions, v1.ConditionReady); c.Reason != v1.ReasonCredentialNotFound || cond(st.Conditions, v1.ConditionReconciling).Status != metav1.ConditionTrue {
		t.Fatalf("Ready = %+v", c)
	}
	if h.freezer.count() != 0 {
		t.Fatal("froze without a credential")
	}
	secret := &corev1.Secret{ObjectMeta: optedIn(ns, "tok"), Data: map[string][]byte{"token": []byte("v1")}}
	if err := h.c.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	h.reconcileDeployment("sd")
	st = h.deployment("sd").Status
	if cond(st.Conditions, v1.ConditionReady).Status != metav1.ConditionTrue || st.CredentialHash != credentialHash(testHashKey, "sd-uid", []byte("v1")) {
		t.Fatalf("status = %+v", st)
	}
	// Rotation: noticed on the next pass, re-frozen with the new credential, value never stored.
	secret.Data["token"] = []byte("v2")
	if err := h.c.Update(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	freezes := h.freezer.count()
	h.reconcileDeployment("sd")
	st = h.deployment("sd").Status
	if h.freezer.count() != freezes+1 || st.CredentialHash != credentialHash(testHashKey, "sd-uid", []byte("v2")) {
		t.Fatalf("rotation not noticed: %d freezes, hash %s", h.freezer.count()-freezes, st.CredentialHash)
	}
}

func TestTamperedInlineProfile(t *testing.T) {
	_, objs := world(t)
	objs[0].(*v1.McpServiceProfile).Spec.Source.Inline.Snapshot.Tools[0].Descriptor.Raw = []byte(toolAx)
	h := newHarness(t, objs...)
	h.reconcileProfile("svc")
	p := h.profile("svc")
	if c := cond(p.Status.Conditions, v1.ConditionSnapshotReconstructed); c.Status != metav1.ConditionFalse || c.Reason != v1.ReasonSnapshotDigestMismatch {
		t.Fatalf("SnapshotMatched = %+v (all %+v)", c, p.Status.Conditions)
	}
	if c := cond(p.Status.Conditions, v1.ConditionSourceVerified); c.Status != metav1.ConditionTrue {
		t.Fatalf("SourceVerified = %+v", c)
	}
}

func TestBindingRefusals(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(objs []client.Object) []client.Object
		reason string
		// waits: the refusal reads Reconciling until the wait grace period has passed.
		waits bool
	}{
		{"missing grant RoleBinding", func(objs []client.Object) []client.Object { return without[*rbacv1.RoleBinding](objs) }, v1.ReasonGrantNotFound, true},
		{"missing role", func(objs []client.Object) []client.Object { return without[*rbacv1.Role](objs) }, v1.ReasonGrantNotFound, true},
		{"role allows another name", func(objs []client.Object) []client.Object {
			for _, o := range objs {
				if r, ok := o.(*rbacv1.Role); ok {
					r.Rules[0].ResourceNames = []string{"other"}
				}
			}
			return objs
		}, v1.ReasonGrantDenied, false},
		{"wrong endpoint ref", func(objs []client.Object) []client.Object {
			sdOf(objs).Spec.Operations[0].EndpointRef = "elsewhere"
			return objs
		}, v1.ReasonEndpointRefInvalid, false},
		{"wrong credential ref", func(objs []client.Object) []client.Object {
			sdOf(objs).Spec.Operations[1].CredentialRef.Key = "other"
			return objs
		}, v1.ReasonCredentialRefMismatch, false},
		{"operation set differs", func(objs []client.Object) []client.Object {
			sdOf(objs).Spec.Operations = sdOf(objs).Spec.Operations[:1]
			return objs
		}, v1.ReasonOperationSetMismatch, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, objs := world(t)
			h := newHarness(t, tc.mutate(objs)...)
			h.freezer.set(liveSnapshot(t, "2026-07-28", toolA, toolB), nil)
			h.reconcileProfile("svc")
			res := h.reconcileDeployment("sd")
			sd := h.deployment("sd")
			if tc.waits {
				// Another object of the same apply may still bring the grant: Reconciling, and
				// retried before the grace period ends; Stalled once it has passed.
				if kstatusOf(t, sd) != status.InProgressStatus || res.RequeueAfter <= 0 || res.RequeueAfter > defaultWaitGracePeriod+waitMargin {
					t.Fatalf("within the wait grace period: kstatus %s, requeue %v", kstatusOf(t, sd), res.RequeueAfter)
				}
				h.clock.SetTime(h.clock.Now().Add(defaultWaitGracePeriod))
				h.reconcileDeployment("sd")
				sd = h.deployment("sd")
			}
			if c := cond(sd.Status.Conditions, v1.ConditionBound); c.Status != metav1.ConditionFalse || c.Reason != tc.reason {
				t.Fatalf("Bound = %+v", c)
			}
			if c := cond(sd.Status.Conditions, v1.ConditionSnapshotFrozen); c.Status != "Absent" {
				t.Fatalf("SnapshotFrozen = %+v (stage after a refusal must not be reported)", c)
			}
			if h.freezer.count() != 0 {
				t.Fatal("an unbound deployment dialled its endpoint")
			}
			if kstatusOf(t, sd) != status.FailedStatus {
				t.Fatalf("kstatus = %s", kstatusOf(t, sd))
			}
		})
	}
}

func TestCollisionSecondRefusedNamingFirst(t *testing.T) {
	_, objs := world(t)
	first := sdOf(objs)
	second := first.DeepCopy()
	second.Name, second.UID = "sd2", "sd2-uid"
	second.CreationTimestamp = metav1.NewTime(first.CreationTimestamp.Add(time.Minute))
	second.Spec.ProviderID = "prov2"
	second.Spec.MCPConnection.URL = "https://other.example.com/mcp"
	for _, o := range objs {
		if r, ok := o.(*rbacv1.Role); ok {
			r.Rules[0].ResourceNames = nil
		}
	}
	h := newHarness(t, append(objs, second)...)
	h.activate()
	h.reconcileDeployment("sd2")
	c := cond(h.deployment("sd2").Status.Conditions, v1.ConditionBound)
	if c.Reason != v1.ReasonOperationCollision || !strings.Contains(c.Message, "team/sd") {
		t.Fatalf("Bound = %+v", c)
	}
	if c := cond(h.deployment("sd").Status.Conditions, v1.ConditionReady); c.Status != metav1.ConditionTrue {
		t.Fatalf("the first deployment lost its claim: %+v", c)
	}
	// The holder goes away: the second one takes over.
	if err := h.c.Delete(context.Background(), h.deployment("sd")); err != nil {
		t.Fatal(err)
	}
	h.reconcileDeployment("sd2")
	if c := cond(h.deployment("sd2").Status.Conditions, v1.ConditionReady); c.Status != metav1.ConditionTrue {
		t.Fatalf("Ready after the holder left = %+v", c)
	}
}

func without[T client.Object](objs []client.Object) []client.Object {
	var out []client.Object
	for _, o := range objs {
		if _, ok := o.(T); !ok {
			out = append(out, o)
		}
	}
	return out
}

func sdOf(objs []client.Object) *v1.ServiceDeployment {
	for _, o := range objs {
		if sd, ok := o.(*v1.ServiceDeployment); ok {
			return sd
		}
	}
	return nil
}

func TestMetricsCountTransitionsOnly(t *testing.T) {
	_, objs := world(t)
	h := newHarness(t, objs...)
	m := h.dep.Metrics
	h.activate()
	h.reconcileDeployment("sd") // no-op
	if got := testutil.ToFloat64(m.Activations); got != 1 {
		t.Fatalf("activations = %v", got)
	}
	if got := testutil.CollectAndCount(m.FreezeDuration); got != 1 {
		t.Fatalf("freeze duration series = %d", got)
	}
	h.freezer.set(liveSnapshot(t, "2026-07-28", toolA), nil)
	h.clock.SetTime(h.clock.Now().Add(2 * time.Hour))
	h.reconcileDeployment("sd")
	h.reconcileDeployment("sd") // still drifted: not counted again
	if got := testutil.ToFloat64(m.DriftDetections); got != 1 {
		t.Fatalf("drift detections = %v", got)
	}
	if got := testutil.ToFloat64(m.Refusals.WithLabelValues("ServiceDeployment", v1.ReasonSnapshotDrift)); got != 1 {
		t.Fatalf("refusals{SnapshotDrift} = %v", got)
	}
}

// TestReverifyAnnotationForcesFreeze pins that a ReverifyRequestedAtAnnotation newer than the
// last freeze (what the gateway writes on live drift) makes the next pass freeze even when no
// re-verification is due, that the freeze satisfies it, and that drift found this way refuses
// the deployment at once.
func TestReverifyAnnotationForcesFreeze(t *testing.T) {
	_, objs := world(t)
	h := newHarness(t, objs...)
	h.dep.ReverifyInterval = 0
	h.activate()

	freezes := h.freezer.count()
	h.reconcileDeployment("sd")
	if h.freezer.count() != freezes {
		t.Fatal("a pass with nothing due froze the server")
	}

	h.clock.SetTime(h.clock.Now().Add(3 * time.Second))
	h.annotate("sd", h.clock.Now().Add(-time.Second).Format(time.RFC3339Nano))
	h.reconcileDeployment("sd")
	if h.freezer.count() != freezes+1 {
		t.Fatalf("the re-verify annotation did not force a freeze: %d freezes", h.freezer.count()-freezes)
	}
	h.reconcileDeployment("sd")
	if h.freezer.count() != freezes+1 {
		t.Fatal("a satisfied re-verify request froze again")
	}

	// A request after the live server changed finds the drift.
	h.freezer.set(liveSnapshot(t, "2026-07-28", toolA), nil)
	h.clock.SetTime(h.clock.Now().Add(3 * time.Second))
	h.annotate("sd", h.clock.Now().Format(time.RFC3339))
	h.reconcileDeployment("sd")
	if c := cond(h.deployment("sd").Status.Conditions, v1.ConditionReady); c.Status != metav1.ConditionFalse || c.Reason != v1.ReasonSnapshotDrift {
		t.Fatalf("Ready after a re-verify request over a changed server = %+v", c)
	}
}

// TestReverifyAnnotationNotDue is the must-fail twin: a request older than the last freeze, one
// too far in the future, and one that is not RFC 3339 force no freeze; one slightly in the future
// is scheduled, not frozen early.
func TestReverifyAnnotationNotDue(t *testing.T) {
	_, objs := world(t)
	h := newHarness(t, objs...)
	h.dep.ReverifyInterval = 0
	h.activate()
	freezes := h.freezer.count()
	now := h.clock.Now()
	for _, v := range []string{now.Add(-time.Hour).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339), "yesterday"} {
		h.annotate("sd", v)
		h.reconcileDeployment("sd")
		if h.freezer.count() != freezes {
			t.Fatalf("annotation %q forced a freeze", v)
		}
	}
	h.annotate("sd", now.Add(10*time.Second).Format(time.RFC3339))
	res := h.reconcileDeployment("sd")
	if h.freezer.count() != freezes {
		t.Fatal("a request stamped in the future froze early")
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > 10*time.Second {
		t.Fatalf("RequeueAfter = %v, want the wait until the request is due", res.RequeueAfter)
	}
}

// annotate sets the re-verify annotation of deployment name.
func (h *harness) annotate(name, value string) {
	h.t.Helper()
	sd := h.deployment(name)
	orig := sd.DeepCopy()
	if sd.Annotations == nil {
		sd.Annotations = map[string]string{}
	}
	sd.Annotations[v1.ReverifyRequestedAtAnnotation] = value
	if err := h.c.Patch(context.Background(), sd, client.MergeFrom(orig)); err != nil {
		h.t.Fatalf("annotate: %v", err)
	}
}

// testHashKey is the reconciler tests' credential hash key.
var testHashKey = []byte("0123456789abcdef0123456789abcdef")

// optedIn is the metadata of a credential Secret that opts in for the two test hosts.
func optedIn(ns, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{v1.CredentialLabel: "true"},
		Annotations: map[string]string{v1.CredentialAllowedHostsAnnotation: "mcp.example.com, other.example.com"}}
}

// TestPeriodicReverifyWaitsForItsHostSlot: a due periodic re-verification whose upstream host has
// spent its allowance (another deployment froze it just now) does not dial, writes nothing and
// keeps the deployment Ready; it comes back when its slot comes and freezes then. A first
// activation never waits (the twin: activate above froze at once with the limiter in place).
func TestPeriodicReverifyWaitsForItsHostSlot(t *testing.T) {
	_, objs := world(t)
	h := newHarness(t, objs...)
	h.dep.HostFreezeLimit = NewHostFreezeLimiter(1)
	h.activate()
	freezes := h.freezer.count()

	h.clock.SetTime(h.clock.Now().Add(2 * time.Hour))
	h.dep.HostFreezeLimit.Take("https://mcp.example.com/other", h.clock.Now()) // a sharer of the host froze it
	writes := h.writes
	res := h.reconcileDeployment("sd")
	if h.freezer.count() != freezes || h.writes != writes {
		t.Fatalf("a re-verification without a host slot froze (%d) or wrote (%d)", h.freezer.count()-freezes, h.writes-writes)
	}
	if res.RequeueAfter != time.Minute {
		t.Fatalf("RequeueAfter = %v, want the minute until its slot", res.RequeueAfter)
	}
	if c := cond(h.deployment("sd").Status.Conditions, v1.ConditionReady); c.Status != metav1.ConditionTrue {
		t.Fatalf("a waiting re-verification changed Ready: %+v", c)
	}
	h.clock.SetTime(h.clock.Now().Add(time.Minute))
	h.reconcileDeployment("sd")
	if h.freezer.count() != freezes+1 {
		t.Fatalf("at its slot the re-verification froze %d times, want once", h.freezer.count()-freezes)
	}
}
