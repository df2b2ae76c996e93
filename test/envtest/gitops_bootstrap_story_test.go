package envtest

// GitOps from an empty cluster (issue 29): a platform's and a team's objects — the team
// namespace's label, an McpTrustPolicy granting the team's signing key and provenance, the team's
// opted-in bearer and key Secrets, a grant Role and RoleBinding, an McpServiceProfile by digest
// and a ServiceDeployment — applied one by one with Flux's server-side apply engine in random
// orders (and in reverse dependency order), with the manager starting at a random point of the
// apply, under production retry intervals. Every status write of the profile and the deployment
// is read by kstatus, by the shipped Flux healthCheckExprs and by the shipped Argo CD Lua health
// check: none may read Failed (Degraded) on the way, and both must be Ready within a bound of
// the last arrival that is well below the retry interval (so only the watches can meet it).
// Twin: a pack signed by a key that no trust source names reads Reconciling, then Stalled with
// its reason once the wait grace period has passed, and stays so; a trust policy naming the key
// then makes it Ready at once.

import (
	"context"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/ssa"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/managerapp"
	"github.com/b10x/connector-mcp/internal/mcptest"
	"github.com/b10x/connector-mcp/internal/ociregistry"
	"github.com/b10x/connector-mcp/internal/ocitest"
)

// bootstrapReadyBound is how long after the last arrival (the last object applied, or the
// manager started) the profile and the deployment must both be Ready: a fraction of the
// production retry interval (30 s, the first retry drawn in [15 s, 30 s)), so a convergence that
// waited for a retry instead of a watch fails it.
const bootstrapReadyBound = 12 * time.Second

// bootstrapOrders is the number of random apply orders, besides the reverse dependency order.
const bootstrapOrders = 20

// traceEntry is one observed state of an object: every watch event of the profile and the
// deployment, with what kstatus, the Flux expressions and the Argo CD script make of it.
type traceEntry struct {
	at                        time.Duration
	kind, ready               string
	kstatus, flux, argo, note string
}

func (e traceEntry) String() string {
	return fmt.Sprintf("%6.2fs %-18s ready=%-32s kstatus=%-10s flux=%-10s argo=%-11s %s", e.at.Seconds(), e.kind, e.ready, e.kstatus, e.flux, e.argo, e.note)
}

// statusTrace records every watch event of the profiles and deployments of a namespace.
type statusTrace struct {
	start time.Time
	mu    sync.Mutex
	list  []traceEntry
}

func (s *statusTrace) entries() []traceEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.list)
}

// watchTrace starts recording the McpServiceProfiles and ServiceDeployments of ns until the
// test ends.
func watchTrace(t *testing.T, ns string) *statusTrace {
	t.Helper()
	tr := &statusTrace{start: time.Now()}
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	script := argoScript(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for _, w := range []struct {
		list client.ObjectList
		kind string
	}{{&apiv1.McpServiceProfileList{}, "McpServiceProfile"}, {&apiv1.ServiceDeploymentList{}, "ServiceDeployment"}} {
		wi, err := wc.Watch(ctx, w.list, client.InNamespace(ns))
		if err != nil {
			t.Fatalf("watch %s: %v", w.kind, err)
		}
		wg.Add(1)
		go func(kind string) {
			defer wg.Done()
			defer wi.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case ev, ok := <-wi.ResultChan():
					if !ok {
						return
					}
					obj, ok := ev.Object.(client.Object)
					if !ok {
						continue
					}
					m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
					if err != nil {
						continue
					}
					u := &unstructured.Unstructured{Object: m}
					u.SetAPIVersion(apiv1.GroupVersion.String())
					u.SetKind(kind)
					e := traceEntry{at: time.Since(tr.start), kind: kind, ready: readyReasonOf(u), note: string(ev.Type)}
					if res, err := status.Compute(u); err == nil {
						e.kstatus = res.Status.String()
					}
					e.flux = fluxHealth(t, u)
					e.argo, _ = argoHealth(t, script, u)
					tr.mu.Lock()
					tr.list = append(tr.list, e)
					tr.mu.Unlock()
				}
			}
		}(w.kind)
	}
	return tr
}

// failedOnTheWay returns the entries of tr that read Failed (kstatus, Flux) or Degraded (Argo CD).
func failedOnTheWay(entries []traceEntry) []traceEntry {
	var out []traceEntry
	for _, e := range entries {
		if e.kstatus == status.FailedStatus.String() || e.flux == status.FailedStatus.String() || e.argo == "Degraded" {
			out = append(out, e)
		}
	}
	return out
}

// bootstrapBundle is one team's GitOps bundle: the manifests, in dependency order (each depends
// only on the ones before it), and the profile and deployment whose health is read.
type bootstrapBundle struct {
	manifests           []*unstructured.Unstructured
	profile, deployment *unstructured.Unstructured
}

// newBootstrapBundle builds the bundle of namespace ns: a live server, a reviewed pack of it
// signed by signer with the team's provenance, and the objects that make it valid. The trust
// policy (cluster-scoped) is deleted when the test ends.
func newBootstrapBundle(t *testing.T, reg *ocitest.Registry, ns string, signer teamSigner, trusted string) bootstrapBundle {
	t.Helper()
	_, h := modernServer(mcptest.DefaultTools())
	live := startSwitchable(t, h)
	doc := reviewedProfile(t, live.URL)
	oc := &ociregistry.Client{PlainHTTP: true}
	repo, err := ociregistry.ParseRepository(reg.Host + "/teams/" + ns)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := oc.Push(context.Background(), repo, []*apiv1.ProfileDocument{doc})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := signer.signer.Sign(context.Background(), oc, ref, &ociregistry.Provenance{
		SourceRepository: teamRepo, SourceRef: packRef, SourceRevision: packRevision}); err != nil {
		t.Fatal(err)
	}
	teamLabel := map[string]string{"connectors.b10x.io/team": ns}
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: teamLabel}}
	policy := &apiv1.McpTrustPolicy{ObjectMeta: metav1.ObjectMeta{Name: "gitops-" + ns},
		Spec: apiv1.McpTrustPolicySpec{NamespaceSelector: metav1.LabelSelector{MatchLabels: teamLabel},
			Signers:    []apiv1.TrustedSigner{{Name: "team-key", PublicKeyPEM: trusted}},
			Provenance: []apiv1.ProvenancePolicy{{SourceRepository: teamRepo, SourceRef: packRef}}}}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), policy) })
	keySecret := newSecret(ns, "team-key", "cosign.pub", signer.pem)
	bearer := newSecret(ns, "svc-token", "token", "v1")
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "svc-invoker"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"invoke"}, APIGroups: []string{apiv1.GroupVersion.Group}, Resources: []string{"servicedeployments"}, ResourceNames: []string{"svc"}}}}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "svc-invokers"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "agent", Namespace: ns}}}
	prof := &apiv1.McpServiceProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "svc"},
		Spec: apiv1.McpServiceProfileSpec{Source: apiv1.ProfileSource{OCI: &apiv1.OCISource{Ref: ref.String(),
			Verify: &apiv1.VerifyPolicy{PublicKey: &apiv1.SecretKeyReference{Name: "team-key", Key: "cosign.pub"},
				Provenance: &apiv1.ProvenancePolicy{SourceRepository: teamRepo, SourceRef: packRef}}}}}}
	sd := newDeployment(ns, "svc", "svc", "svc-"+ns, live.URL, doc, &apiv1.CredentialRef{Name: "svc-token", Key: "token"}, rb.Name)
	gv := apiv1.GroupVersion.String()
	b := bootstrapBundle{
		profile:    toApply(t, prof, gv, "McpServiceProfile"),
		deployment: toApply(t, sd, gv, "ServiceDeployment"),
	}
	b.manifests = []*unstructured.Unstructured{
		toApply(t, nsObj, "v1", "Namespace"),
		toApply(t, policy, gv, "McpTrustPolicy"),
		toApply(t, keySecret, "v1", "Secret"),
		toApply(t, bearer, "v1", "Secret"),
		toApply(t, role, "rbac.authorization.k8s.io/v1", "Role"),
		toApply(t, rb, "rbac.authorization.k8s.io/v1", "RoleBinding"),
		b.profile.DeepCopy(),
		b.deployment.DeepCopy(),
	}
	return b
}

// bootstrapOptions are the manager's options of the bootstrap stories: the production retry
// interval and wait grace period, provenance required, no platform trust (trust comes only from
// McpTrustPolicies).
func bootstrapOptions() managerapp.Options {
	o := devOptions()
	o.SkipProvenanceUnsafe = false
	o.RetryInterval = managerapp.DefaultOptions().RetryInterval
	o.WaitGracePeriod = managerapp.DefaultOptions().WaitGracePeriod
	return o
}

// applyStep is one step of an apply order: a manifest (by index) or, at managerStep, the start of
// the manager.
const managerStep = -1

// runBootstrapOrder applies b's manifests in order (indexes into b.manifests, with managerStep
// where the manager starts), waits for both objects to be Ready and returns the time from the last
// arrival to Ready and the trace.
//
// With seen, each profile or deployment applied is waited for until the manager wrote its first
// status (it has seen the object before what it depends on arrives: the worst case of an apply
// that takes a while).
func runBootstrapOrder(t *testing.T, rng *mrand.Rand, ns string, b bootstrapBundle, order []int, seen bool) (time.Duration, []traceEntry) {
	t.Helper()
	ctx := context.Background()
	tr := watchTrace(t, ns)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	rm := ssa.NewResourceManager(c, nil, ssa.Owner{Field: "kustomize-controller", Group: "kustomize.toolkit.fluxcd.io"})
	var last time.Time
	for _, step := range order {
		if step == managerStep {
			op := startOperator(t, ns, bootstrapOptions())
			// Running, as the chart's Deployment would be, before the next object arrives: its
			// caches have synced (a cache List blocks until then).
			for _, l := range []client.ObjectList{&apiv1.McpServiceProfileList{}, &apiv1.ServiceDeploymentList{}, &rbacv1.RoleBindingList{}, &corev1.SecretList{}} {
				var err error
				if !pollUntil(20*time.Millisecond, storyTimeout, func() bool {
					err = op.mgr.GetCache().List(ctx, l, client.InNamespace(ns))
					return err == nil
				}) {
					t.Fatalf("manager cache: %v", err)
				}
			}
		} else {
			m := b.manifests[step]
			if _, err := rm.Apply(ctx, m.DeepCopy(), ssa.DefaultApplyOptions()); err != nil {
				t.Fatalf("flux ssa apply of %s %s: %v", m.GetKind(), m.GetName(), err)
			}
			if k := m.GetKind(); seen && (k == "McpServiceProfile" || k == "ServiceDeployment") {
				waitU(t, m, k+" seen by the manager", func(u *unstructured.Unstructured) bool { return readyReasonOf(u) != "" })
			}
		}
		last = time.Now()
		// Arrivals spread over up to a second, so the informers see them in every interleaving.
		time.Sleep(time.Duration(rng.IntN(150)) * time.Millisecond)
	}
	current := func(u *unstructured.Unstructured) bool {
		return kstatusOfU(t, u) == status.CurrentStatus && fluxHealth(t, u) == string(status.CurrentStatus)
	}
	var ready time.Time
	if !pollUntil(50*time.Millisecond, storyTimeout, func() bool {
		if current(fetch(t, b.profile)) && current(fetch(t, b.deployment)) {
			ready = time.Now()
			return true
		}
		return false
	}) {
		st, _ := json.Marshal(fetch(t, b.deployment).Object["status"])
		t.Fatalf("order %v: not Ready within %s; deployment status %s\n%s", order, storyTimeout, st, traceText(tr.entries()))
	}
	// Let the last status events arrive before the trace is read.
	time.Sleep(200 * time.Millisecond)
	return ready.Sub(last), tr.entries()
}

func traceText(entries []traceEntry) string {
	var b strings.Builder
	for _, e := range entries {
		b.WriteString(e.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// TestStoryGitOpsBootstrapAnyOrder: the bundle applied in reverse dependency order (manager
// first, deployment first, namespace label last), with each dependency last, and in 20 random
// orders (the manager starting anywhere among them) converges to Ready with
// no object ever reading Failed or Degraded, within bootstrapReadyBound of the last arrival.
func TestStoryGitOpsBootstrapAnyOrder(t *testing.T) {
	reg := ocitest.New(ocitest.Options{Referrers: true})
	t.Cleanup(reg.Close)
	signer := newTeamSigner(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("apply order seed %d", seed)
	rng := mrand.New(mrand.NewPCG(seed, 29)) //nolint:gosec // G404: a logged, replayable apply order, not a secret

	// The deterministic orders: the reverse dependency order, and each object the profile or
	// the deployment depends on arriving last (so every arrival's watch is what re-verifies);
	// in these the manager sees each profile and deployment before what follows arrives.
	type order struct {
		name  string
		steps []int
		seen  bool
	}
	const dependencies = 6 // the manifests before the profile and the deployment
	var orders []order
	reverse := []int{managerStep, 7, 6, 5, 4, 3, 2, 1, 0}
	orders = append(orders, order{"reverse", reverse, true})
	lastNames := []string{"namespace-label", "trust-policy", "key-secret", "bearer-secret", "role", "rolebinding"}
	for k := 0; k < dependencies; k++ {
		steps := []int{managerStep}
		for j := 0; j < 8; j++ {
			if j != k {
				steps = append(steps, j)
			}
		}
		orders = append(orders, order{lastNames[k] + "-last", append(steps, k), true})
	}
	for i := 0; i < bootstrapOrders; i++ {
		steps := []int{managerStep, 0, 1, 2, 3, 4, 5, 6, 7}
		rng.Shuffle(len(steps), func(a, b int) { steps[a], steps[b] = steps[b], steps[a] })
		orders = append(orders, order{"random", steps, false})
	}

	var took []time.Duration
	for i, o := range orders {
		ns := newNamespace(t, fmt.Sprintf("gitops-boot-%d", i))
		b := newBootstrapBundle(t, reg, ns, signer, signer.pem)
		t.Run(fmt.Sprintf("%s-%d", o.name, i), func(t *testing.T) {
			d, entries := runBootstrapOrder(t, rng, ns, b, o.steps, o.seen)
			took = append(took, d)
			if failed := failedOnTheWay(entries); len(failed) > 0 {
				t.Errorf("order %v read Failed on the way:\n%s\nwhole trace:\n%s", describeOrder(b, o.steps), traceText(failed), traceText(entries))
			}
			if o.seen && !waitedOnTheWay(entries) {
				t.Errorf("order %v: nothing waited on the way (the order did not exercise an arrival):\n%s", describeOrder(b, o.steps), traceText(entries))
			}
			if o.name == "reverse" && !sawWaiting(entries, "McpServiceProfile", apiv1.ReasonUntrustedSigner) {
				t.Errorf("reverse order: the profile never waited for its trust source:\n%s", traceText(entries))
			}
			if d > bootstrapReadyBound {
				t.Errorf("order %v: Ready %s after the last arrival, want at most %s\n%s", describeOrder(b, o.steps), d, bootstrapReadyBound, traceText(entries))
			}
		})
	}
	if len(took) > 0 {
		sort.Slice(took, func(a, b int) bool { return took[a] < took[b] })
		t.Logf("last arrival to Ready over %d orders: p50 %s, max %s", len(took), took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
	}
}

// waitedOnTheWay reports whether the profile or the deployment read Ready False while InProgress.
func waitedOnTheWay(entries []traceEntry) bool {
	for _, e := range entries {
		if strings.HasPrefix(e.ready, "False/") && e.kstatus == status.InProgressStatus.String() {
			return true
		}
	}
	return false
}

// sawWaiting reports whether an object of kind read Ready False with reason while InProgress.
func sawWaiting(entries []traceEntry, kind, reason string) bool {
	for _, e := range entries {
		if e.kind == kind && e.ready == "False/"+reason && e.kstatus == status.InProgressStatus.String() {
			return true
		}
	}
	return false
}

// describeOrder names the steps of an order.
func describeOrder(b bootstrapBundle, steps []int) string {
	var names []string
	for _, s := range steps {
		if s == managerStep {
			names = append(names, "manager")
			continue
		}
		names = append(names, b.manifests[s].GetKind())
	}
	return strings.Join(names, ",")
}

// TestStoryGitOpsUntrustedKeyStalls is the must-fail twin: the trust policy names another key
// than the pack's signer. The profile reads Reconciling (VerificationFailed, waiting for a trust
// source naming its signer), then, once the wait grace period has passed, Stalled with the same
// reason and untrusted_signature, and stays Stalled; its deployment follows (ProfileNotReady).
// A trust policy naming the signer then re-verifies it at once: Ready.
func TestStoryGitOpsUntrustedKeyStalls(t *testing.T) {
	reg := ocitest.New(ocitest.Options{Referrers: true})
	t.Cleanup(reg.Close)
	signer, other := newTeamSigner(t), newTeamSigner(t)
	ns := newNamespace(t, "gitops-untrusted")
	b := newBootstrapBundle(t, reg, ns, signer, other.pem)
	tr := watchTrace(t, ns)
	o := bootstrapOptions()
	const grace = 4 * time.Second
	o.WaitGracePeriod = grace
	startOperator(t, ns, o)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	rm := ssa.NewResourceManager(c, nil, ssa.Owner{Field: "kustomize-controller", Group: "kustomize.toolkit.fluxcd.io"})
	for _, m := range b.manifests {
		if _, err := rm.Apply(context.Background(), m, ssa.DefaultApplyOptions()); err != nil {
			t.Fatalf("flux ssa apply of %s %s: %v", m.GetKind(), m.GetName(), err)
		}
	}
	applied := time.Now()
	prof := &apiv1.McpServiceProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "svc"}}
	prof = waitObj(t, prof, storyTimeout, "Stalled VerificationFailed", func(p *apiv1.McpServiceProfile) bool {
		return hasCondition(p, apiv1.ConditionStalled, metav1.ConditionTrue, apiv1.ReasonVerificationFailed)
	})
	stalledAfter := time.Since(applied)
	if c := condOf(prof, apiv1.ConditionSourceVerified); !strings.Contains(c.Message, "untrusted_signature") || prof.Status.Verified != nil || prof.Status.SnapshotDigest != "" {
		t.Fatalf("SourceVerified %q, verified %+v", c.Message, prof.Status.Verified)
	}
	if stalledAfter < grace-time.Second {
		t.Fatalf("Stalled %s after the apply, before the %s grace period", stalledAfter, grace)
	}
	sd := &apiv1.ServiceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "svc"}}
	waitObj(t, sd, storyTimeout, "deployment Stalled ProfileNotReady", func(sd *apiv1.ServiceDeployment) bool {
		return hasCondition(sd, apiv1.ConditionStalled, metav1.ConditionTrue, apiv1.ReasonProfileNotReady)
	})
	// It stays Stalled (a later pass does not start a new wait).
	time.Sleep(grace / 2)
	waitObj(t, prof, time.Second, "still Stalled", func(p *apiv1.McpServiceProfile) bool {
		return hasCondition(p, apiv1.ConditionStalled, metav1.ConditionTrue, apiv1.ReasonVerificationFailed)
	})
	entries := tr.entries()
	if !sawWaiting(entries, "McpServiceProfile", apiv1.ReasonVerificationFailed) {
		t.Fatalf("the profile never read InProgress (waiting) before Stalled:\n%s", traceText(entries))
	}
	if len(failedOnTheWay(entries)) == 0 {
		t.Fatalf("the twin never read Failed:\n%s", traceText(entries))
	}

	// The platform trusts the signer: re-verified at once, not after a retry.
	fix := &apiv1.McpTrustPolicy{ObjectMeta: metav1.ObjectMeta{Name: "gitops-fix-" + ns},
		Spec: apiv1.McpTrustPolicySpec{NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"connectors.b10x.io/team": ns}},
			Signers:    []apiv1.TrustedSigner{{Name: "team-key", PublicKeyPEM: signer.pem}},
			Provenance: []apiv1.ProvenancePolicy{{SourceRepository: teamRepo, SourceRef: packRef}}}}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), fix) })
	mustCreate(t, fix)
	arrived := time.Now()
	waitObj(t, sd, bootstrapReadyBound, "deployment Ready after the trust arrived", isReady[*apiv1.ServiceDeployment])
	t.Logf("Stalled %s after the apply (grace %s); trust arrival to Ready %s", stalledAfter.Round(time.Millisecond), grace, time.Since(arrived).Round(time.Millisecond))
}
