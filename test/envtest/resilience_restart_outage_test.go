package envtest

// Resilience story: a manager restart during a registry outage keeps what was verified before it
// active, through the verified-pack store (internal/packstore): raw registry content in a
// ConfigMap of the manager's namespace, verified again, offline, by the new manager.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/managerapp"
	"github.com/b10x/connector-mcp/internal/ociregistry"
	"github.com/b10x/connector-mcp/internal/packstore"
)

// restartWorld is a signed pack verified by a first manager, its deployment Ready; then that
// manager stops and the registry goes away (connections refused).
type restartWorld struct {
	ns     string
	w      *packWorld
	ref    ociregistry.Reference
	o      managerapp.Options
	prof   *apiv1.McpServiceProfile
	sd     *apiv1.ServiceDeployment
	active string
	events map[string]int32
}

// startBeforeOutage runs the first manager (store in ns when withStore) until the profile and
// the deployment are Ready, then stops it and closes the registry.
func startBeforeOutage(t *testing.T, prefix string, withStore bool) *restartWorld {
	t.Helper()
	ns := newNamespace(t, prefix)
	w := newPackWorld(t, ns)
	o := devOptions()
	w.trustPlatform(&o)
	if withStore {
		o.VerifiedPackNamespace = ns
	}
	first := startOperator(t, ns, o)
	ref := w.push(t, "team/demo")
	w.sign(t, ref, packRef)
	prof := packProfile(ns, "demo", ref, mainPolicy())
	mustCreate(t, prof)
	makeGrant(t, ns, "all")
	sd := newDeployment(ns, "demo", "demo", "demo", w.url, w.doc, nil, "all")
	mustCreate(t, sd)
	prof = waitObj(t, prof, storyTimeout, "pack verified", isReady[*apiv1.McpServiceProfile])
	sd = waitObj(t, sd, storyTimeout, "deployment Ready", isReady[*apiv1.ServiceDeployment])
	if withStore {
		waitStored(t, ns, ref)
	}
	first.stop()
	w.reg.Close()
	return &restartWorld{ns: ns, w: w, ref: ref, o: o, prof: prof, sd: sd, active: sd.Status.ActiveSnapshotDigest,
		events: eventCounts(t, ns, "demo")}
}

// waitStored waits for ref's store entry in ns and returns it.
func waitStored(t *testing.T, ns string, ref ociregistry.Reference) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{}
	var err error
	if !pollUntil(pollInterval, storyTimeout, func() bool {
		err = k8sClient.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: packstore.Name(ref)}, cm)
		return err == nil || !apierrors.IsNotFound(err)
	}) || err != nil {
		t.Fatalf("the verified pack was not stored: %v", err)
	}
	return cm
}

// A pack is verified and its deployment Ready; the manager stops, the registry goes away, and a
// NEW manager starts (fresh verifier, empty cache). It verifies the pack again from the store,
// offline: the profile's status does not change, the deployment is re-verified (a full pass:
// profile resolution, live freeze, match) and stays Ready with the same active snapshot in every
// status revision the apiserver held, and no event is recorded. The store entry is a
// ConfigMap of raw content labelled connectors.b10x.io/verified-pack=true.
func TestResilienceRestartDuringRegistryOutage(t *testing.T) {
	checkNoLeaks(t)
	rw := startBeforeOutage(t, "resil-restart", true)
	cm := waitStored(t, rw.ns, rw.ref)
	if cm.Labels[packstore.LabelVerifiedPack] != "true" || cm.Annotations[packstore.AnnotationReference] != rw.ref.String() ||
		len(cm.Data) != 0 || len(cm.BinaryData) != 7 { // referrers.json, manifest, layer, 2 x (referrer manifest, bundle)
		t.Fatalf("store entry: labels %v, annotations %v, %d data keys, %d binaryData keys", cm.Labels, cm.Annotations, len(cm.Data), len(cm.BinaryData))
	}
	log := watchDeployment(t, rw.ns, "demo")

	second := startOperator(t, rw.ns, rw.o)
	waitProfilePass(t, second, rw.ns, "demo")
	sd := rw.sd
	for i := 0; i < 2; i++ {
		at := requestReverify(t, sd)
		sd = waitObj(t, sd, storyTimeout, "re-verified after the restart", func(d *apiv1.ServiceDeployment) bool { return frozenSince(d, at) })
		if !isReady(sd) || sd.Status.ActiveSnapshotDigest != rw.active {
			t.Fatalf("re-verification %d after the restart: Ready %+v, active %q", i, condOf(sd, apiv1.ConditionReady), sd.Status.ActiveSnapshotDigest)
		}
	}
	prof := waitObj(t, rw.prof, storyTimeout, "profile status read", func(*apiv1.McpServiceProfile) bool { return true })
	if !equality.Semantic.DeepEqual(rw.prof.Status, prof.Status) {
		t.Fatalf("the profile's status changed after the restart:\nbefore %+v\nafter  %+v", rw.prof.Status, prof.Status)
	}
	seen := log.all()
	if len(seen) < 3 {
		t.Fatalf("the watch saw %d status revisions, want the initial one and two re-verifications", len(seen))
	}
	for i, st := range seen {
		ready := meta.FindStatusCondition(st.Conditions, apiv1.ConditionReady)
		if ready == nil || ready.Status != metav1.ConditionTrue || st.ActiveSnapshotDigest != rw.active {
			t.Fatalf("status revision %d after the restart: Ready %+v, active %q", i, ready, st.ActiveSnapshotDigest)
		}
	}
	if after := eventCounts(t, rw.ns, "demo"); !equality.Semantic.DeepEqual(after, rw.events) {
		t.Fatalf("events after the restart: before %v, after %v", rw.events, after)
	}
	t.Logf("%d status revisions watched; store entry %s (%d keys)", len(seen), cm.Name, len(cm.BinaryData))
}

// waitProfilePass waits until op has reconciled the profile ns/name at least once.
func waitProfilePass(t *testing.T, op *operator, ns, name string) {
	t.Helper()
	if !pollUntil(pollInterval, storyTimeout, func() bool { return op.reconciles(profileGetsPrefix+ns+"/"+name) > 0 }) {
		t.Fatal("the new manager did not reconcile the profile")
	}
}

// The twin without the store (--verified-pack-namespace empty, as before the store existed): the
// new manager cannot verify the pack while the registry is down, and the profile reads
// RegistryUnavailable (transient, not Stalled).
func TestResilienceRestartDuringRegistryOutageWithoutStore(t *testing.T) {
	checkNoLeaks(t)
	rw := startBeforeOutage(t, "resil-restart-nostore", false)
	list := &corev1.ConfigMapList{}
	if err := k8sClient.List(context.Background(), list, client.InNamespace(rw.ns), client.MatchingLabels{packstore.LabelVerifiedPack: "true"}); err != nil || len(list.Items) != 0 {
		t.Fatalf("store entries with the store disabled: %d, %v", len(list.Items), err)
	}
	startOperator(t, rw.ns, rw.o)
	prof := waitObj(t, rw.prof, storyTimeout, "RegistryUnavailable", func(p *apiv1.McpServiceProfile) bool {
		return hasCondition(p, apiv1.ConditionReady, metav1.ConditionFalse, apiv1.ReasonRegistryUnavailable)
	})
	if hasCondition(prof, apiv1.ConditionStalled, metav1.ConditionTrue, "") {
		t.Fatalf("an unreachable registry stalled the profile: %+v", prof.Status.Conditions)
	}
}

// The twin with a tampered store entry (one byte of the profile layer changed, as by anyone who
// could write the manager's namespace): the new manager's verification from the store fails
// closed as the registry being unavailable, the profile is not Ready (RegistryUnavailable, not
// Stalled), and no other snapshot than the one verified before is ever active.
func TestResilienceRestartDuringRegistryOutageTamperedStore(t *testing.T) {
	checkNoLeaks(t)
	rw := startBeforeOutage(t, "resil-restart-tamper", true)
	cm := waitStored(t, rw.ns, rw.ref)
	rec, err := storeOf(t, rw.ns).Load(context.Background(), rw.ref)
	if err != nil {
		t.Fatal(err)
	}
	tampered := ""
	for d, b := range rec.Blobs {
		if d != rw.ref.Digest && len(b) > 0 && b[0] == '{' && !isReferrerOrBundle(rec, d) {
			b[len(b)/2] ^= 0x20 // the profile layer: same length, other bytes
			cm.BinaryData[strings.Replace(d, ":", "-", 1)] = b
			tampered = d
		}
	}
	if tampered == "" {
		t.Fatal("no profile layer in the store entry")
	}
	if err := k8sClient.Update(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	log := watchDeployment(t, rw.ns, "demo")
	startOperator(t, rw.ns, rw.o)
	prof := waitObj(t, rw.prof, storyTimeout, "RegistryUnavailable", func(p *apiv1.McpServiceProfile) bool {
		return hasCondition(p, apiv1.ConditionReady, metav1.ConditionFalse, apiv1.ReasonRegistryUnavailable)
	})
	if hasCondition(prof, apiv1.ConditionStalled, metav1.ConditionTrue, "") {
		t.Fatalf("a tampered store entry stalled the profile: %+v", prof.Status.Conditions)
	}
	at := requestReverify(t, rw.sd)
	sd := waitObj(t, rw.sd, storyTimeout, "a pass after the tamper", func(d *apiv1.ServiceDeployment) bool {
		return frozenSince(d, at) || !isReady(d)
	})
	for i, st := range append(log.all(), sd.Status) {
		if st.ActiveSnapshotDigest != "" && st.ActiveSnapshotDigest != rw.active {
			t.Fatalf("status revision %d: active snapshot %q, want none or the verified %q", i, st.ActiveSnapshotDigest, rw.active)
		}
	}
	// The manager did not rewrite the entry: it saves only what it read from the registry.
	if after := waitStored(t, rw.ns, rw.ref); !equality.Semantic.DeepEqual(after.BinaryData, cm.BinaryData) {
		t.Fatal("the tampered entry was rewritten during the outage")
	}
}

func isReferrerOrBundle(rec *ociregistry.StoredPack, d string) bool {
	for _, r := range rec.Referrers {
		if r.Digest.String() == d {
			return true
		}
	}
	b := rec.Blobs[d]
	return bytes.Contains(b, []byte(`"dsseEnvelope"`))
}

// storeOf is the verified-pack store of ns read and written with the admin client.
func storeOf(t *testing.T, ns string) *packstore.Store {
	t.Helper()
	s, err := packstore.New(ns, k8sClient, k8sClient, 0, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// hex64 is 64 hex digits derived from s (a digest for references in store tests).
func hex64(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// The store itself against a real apiserver: an entry is written once (an equal record writes
// nothing), a record above the bound is refused and not written, and the sweep deletes only the
// entries no McpServiceProfile references, never the young ones.
func TestVerifiedPackStoreEntriesAndSweep(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "packstore")
	store := storeOf(t, ns)
	rec := func(repo string) *ociregistry.StoredPack {
		ref, err := ociregistry.ParseDigestReference("registry.example.com/" + repo + "@sha256:" + hex64(repo))
		if err != nil {
			t.Fatal(err)
		}
		return &ociregistry.StoredPack{Reference: ref, Blobs: map[string][]byte{ref.Digest: []byte(`{"manifest":true}`)}}
	}
	used, unused := rec("team/used"), rec("team/unused")
	for _, r := range []*ociregistry.StoredPack{used, unused} {
		if err := store.Save(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	before := waitStored(t, ns, used.Reference)
	if err := store.Save(ctx, used); err != nil {
		t.Fatal(err)
	}
	if again := waitStored(t, ns, used.Reference); again.ResourceVersion != before.ResourceVersion {
		t.Fatalf("saving an equal record wrote the entry again (%s -> %s)", before.ResourceVersion, again.ResourceVersion)
	}
	got, err := store.Load(ctx, used.Reference)
	if err != nil || !equality.Semantic.DeepEqual(got.Blobs, used.Blobs) || len(got.Referrers) != 0 {
		t.Fatalf("load: %+v, %v", got, err)
	}
	if _, err := store.Load(ctx, rec("team/never").Reference); !errors.Is(err, ociregistry.ErrNotStored) {
		t.Fatalf("load of an absent entry: %v, want ErrNotStored", err)
	}

	small, err := packstore.New(ns, k8sClient, k8sClient, 8, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	big := rec("team/big")
	if err := small.Save(ctx, big); !errors.Is(err, ociregistry.ErrStoreTooLarge) {
		t.Fatalf("save above the bound: %v, want ErrStoreTooLarge", err)
	}
	if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: packstore.Name(big.Reference)}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("an entry above the bound was written: %v", err)
	}

	prof := packProfile(ns, "uses", used.Reference, mainPolicy())
	mustCreate(t, prof)
	sweeper := &packstore.Sweeper{Store: store, Profiles: k8sClient, Deleter: k8sClient, Log: logr.Discard()}
	if n, err := sweeper.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("sweep with the default grace deleted %d young entries (%v)", n, err)
	}
	sweeper.Grace = -1
	if n, err := sweeper.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("sweep without grace deleted %d entries (%v), want the unreferenced one", n, err)
	}
	waitStored(t, ns, used.Reference)
	if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: packstore.Name(unused.Reference)}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the unreferenced entry survived the sweep: %v", err)
	}
}

// startStoreManagerAs starts a manager with the verified-pack store in ns, authenticated as the
// chart's ServiceAccount ns/sa, and returns the log of forbidden requests.
func startStoreManagerAs(t *testing.T, ns, sa string, o managerapp.Options) *forbiddenLog {
	t.Helper()
	log := &forbiddenLog{}
	asSA := rest.CopyConfig(cfg)
	asSA.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + ns + ":" + sa,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
	asSA.Wrap(func(rt http.RoundTripper) http.RoundTripper { return forbiddenRecorder{log: log, next: rt} })
	startOperatorAs(t, asSA, ns, o)
	return log
}

// The store under exactly the chart's RBAC (its namespaced Role): the manager, as the chart's
// ServiceAccount, verifies a pack and stores it in its namespace without a single 403.
func TestVerifiedPackStoreUnderChartRBAC(t *testing.T) {
	ns := newNamespace(t, "packstore-rbac")
	sa := installChartRBAC(t, ns, nil)
	w := newPackWorld(t, ns)
	o := devOptions()
	w.trustPlatform(&o)
	o.VerifiedPackNamespace = ns
	forbidden := startStoreManagerAs(t, ns, sa, o)
	ref := w.push(t, "team/demo")
	w.sign(t, ref, packRef)
	prof := packProfile(ns, "demo", ref, mainPolicy())
	mustCreate(t, prof)
	waitObj(t, prof, storyTimeout, "pack verified", isReady[*apiv1.McpServiceProfile])
	waitStored(t, ns, ref)
	if f := forbidden.list(); len(f) > 0 {
		t.Errorf("the manager was refused %d request(s) under the chart's RBAC: %v", len(f), f)
	}
}

// The twin: with the chart's store Role reduced to reads, the entry's creation is refused, and
// the recorder sees that 403 (the profile is verified all the same: saving is best effort).
func TestVerifiedPackStoreRBACGapIsCaught(t *testing.T) {
	ns := newNamespace(t, "packstore-rbac-gap")
	sa := installChartRBAC(t, ns, func(o *unstructured.Unstructured) {
		if o.GetKind() != "Role" || !strings.HasSuffix(o.GetName(), "-verified-pack-store") {
			return
		}
		_ = unstructured.SetNestedSlice(o.Object, []any{map[string]any{
			"apiGroups": []any{""}, "resources": []any{"configmaps"}, "verbs": []any{"get", "list"}}}, "rules")
	})
	w := newPackWorld(t, ns)
	o := devOptions()
	w.trustPlatform(&o)
	o.VerifiedPackNamespace = ns
	forbidden := startStoreManagerAs(t, ns, sa, o)
	ref := w.push(t, "team/demo")
	w.sign(t, ref, packRef)
	prof := packProfile(ns, "demo", ref, mainPolicy())
	mustCreate(t, prof)
	waitObj(t, prof, storyTimeout, "pack verified", isReady[*apiv1.McpServiceProfile])
	want := "POST /api/v1/namespaces/" + ns + "/configmaps"
	if pollUntil(pollInterval, storyTimeout, func() bool { return slices.Contains(forbidden.list(), want) }) {
		return
	}
	t.Fatalf("no 403 on %q recorded; forbidden requests: %v", want, forbidden.list())
}

// The gateway verifies profiles itself: a gateway started during the registry outage (after the
// manager verified and stored the pack) reads the manager's store, read-only, verifies the pack
// offline and serves the deployment, with the snapshot the manager activated. The twin: a
// gateway not given the store's namespace does not serve it, and logs RegistryUnavailable.
func TestResilienceGatewayStartDuringRegistryOutage(t *testing.T) {
	checkNoLeaks(t)
	rw := startBeforeOutage(t, "resil-gw-outage", true)
	entry := waitStored(t, rw.ns, rw.ref)
	for _, withStore := range []bool{true, false} {
		o := gatewayOptionsFor(rw.o)
		if !withStore {
			o.VerifiedPackNamespace = ""
		}
		_, gw, logs := startGateway(t, rw.ns, o)
		if withStore {
			eventually(t, storyTimeout, "the gateway serves the deployment", func() error {
				s, ok := gw.Registry.Lookup(rw.ns, "demo")
				if !ok {
					return errString("not served yet")
				}
				if s.SnapshotDigest() != rw.active {
					t.Fatalf("the gateway serves snapshot %q, the manager activated %q", s.SnapshotDigest(), rw.active)
				}
				return nil
			})
			continue
		}
		eventually(t, storyTimeout, "the gateway says the registry is unavailable", func() error {
			if !strings.Contains(logs.text(), apiv1.ReasonRegistryUnavailable) {
				return errString("no RegistryUnavailable log yet")
			}
			return nil
		})
		if _, ok := gw.Registry.Lookup(rw.ns, "demo"); ok {
			t.Fatal("a gateway without the store serves a pack it could not verify")
		}
	}
	// The gateway never writes the store.
	if after := waitStored(t, rw.ns, rw.ref); after.ResourceVersion != entry.ResourceVersion {
		t.Fatalf("the store entry was written during the outage (%s -> %s)", entry.ResourceVersion, after.ResourceVersion)
	}
}

// The Sweeper as the manager runs it (Start): one sweep at start, then one per Interval of its
// clock. An unreferenced entry written after the first sweep survives until the clock passes the
// interval (the twin), then is deleted.
func TestVerifiedPackStoreSweeperRunsPeriodically(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := newNamespace(t, "packstore-sweep")
	store := storeOf(t, ns)
	save := func(repo string) ociregistry.Reference {
		ref, err := ociregistry.ParseDigestReference("registry.example.com/" + repo + "@sha256:" + hex64(repo))
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Save(ctx, &ociregistry.StoredPack{Reference: ref, Blobs: map[string][]byte{ref.Digest: []byte(repo)}}); err != nil {
			t.Fatal(err)
		}
		return ref
	}
	gone := func(ref ociregistry.Reference) bool {
		err := k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: packstore.Name(ref)}, &corev1.ConfigMap{})
		return apierrors.IsNotFound(err)
	}
	first := save("team/first")
	clk := clocktesting.NewFakeClock(time.Now())
	sweeper := &packstore.Sweeper{Store: store, Profiles: k8sClient, Deleter: k8sClient, Interval: time.Hour, Grace: -1, Clock: clk, Log: logr.Discard()}
	done := make(chan error, 1)
	go func() { done <- sweeper.Start(ctx) }()
	eventually(t, storyTimeout, "the sweep at start", func() error {
		if !gone(first) {
			return errString("the first entry is still there")
		}
		return nil
	})
	second := save("team/second")
	// The twin: the clock has not moved, so no sweep runs. The sweeper's period comes from the
	// fake clock (a waiter on it); the sweep at start listed the entries before second existed,
	// and nothing else may sweep before the next Step.
	if !pollUntil(pollInterval, storyTimeout, clk.HasWaiters) {
		t.Fatal("the sweeper never waited on its clock")
	}
	if gone(second) {
		t.Fatal("an entry was swept before the interval passed")
	}
	clk.Step(time.Hour)
	eventually(t, storyTimeout, "the periodic sweep", func() error {
		if !gone(second) {
			return errString("the second entry is still there")
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
