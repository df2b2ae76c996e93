package controllers

import (
	"context"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/b10x/connector-mcp/api/v1"
)

// Collisions by index.
//
// A deployment's claim (see bundleClaim) is its provider identity, its normalized endpoint authority
// and its operations as "connectionRef/operationRef". The claimIndex maps each such full claim
// key to the deployments holding it, so the bind stage reads only the claims that share a key
// with the deployment under review, and a change re-enqueues only the deployments that share a
// key with the changed one. Unrelated deployments share no key, whatever their operation names.
//
// The index is fed by the ServiceDeployment informer (provider and authority come from the spec)
// and, for operations, by derivation: the connectionRef is in the verified profile document, so a
// deployment's operation keys are derived from its profile once per (deployment generation,
// profile UID, generation, snapshot digest, readiness) and memoized. A profile event marks its
// deployments for derivation; every pass derives the marked ones before it judges collisions, so
// a judgement never misses an earlier claim the cache already holds.

// claimKeyKind prefixes a full claim key with its kind, so a provider never equals an authority.
const (
	claimKeyProvider  = "provider\x00"
	claimKeyAuthority = "authority\x00"
	claimKeyOperation = "operation\x00"
)

// claimMemoKey is what a deployment's derived operation keys depend on.
type claimMemoKey struct {
	generation        int64
	profileUID        types.UID
	profileGeneration int64
	profileDigest     string
	profileReady      bool
}

// claimEntry is one deployment in the claim index.
type claimEntry struct {
	claim bundleClaim // Key, Created, Provider, Authority from the spec; Operations derived
	uid   types.UID
	gen   int64
	// profile is spec.profileRef.name.
	profile string
	// memo is the key the operations were derived under; valid only when derived is true.
	memo    claimMemoKey
	derived bool
	// dirty marks the operations for derivation (new deployment, new generation, profile event).
	dirty bool
	// version counts changes, so a derivation that raced a change is not stored.
	version uint64
}

// claimIndex is the in-memory index of every deployment's claim, keyed by full claim key.
type claimIndex struct {
	mu      sync.Mutex
	entries map[types.NamespacedName]*claimEntry
	holders map[string]map[types.NamespacedName]struct{}
	// pending are the entries marked dirty.
	pending map[types.NamespacedName]struct{}
	// drainMu serialises derivations, so parallel passes do not derive the same entries twice
	// and a pass judges only after every marked entry was derived.
	drainMu sync.Mutex
	// derivations counts derived claims (tests and figures).
	derivations int
}

// keysOf lists the full claim keys of c (provider always, authority when valid, operations).
func keysOf(c *bundleClaim) []string {
	out := make([]string, 0, 2+len(c.Operations))
	out = append(out, claimKeyProvider+c.Provider)
	if c.Authority != "" {
		out = append(out, claimKeyAuthority+c.Authority)
	}
	for _, o := range c.Operations {
		out = append(out, claimKeyOperation+o)
	}
	return out
}

func (x *claimIndex) init() {
	if x.entries == nil {
		x.entries = map[types.NamespacedName]*claimEntry{}
		x.holders = map[string]map[types.NamespacedName]struct{}{}
		x.pending = map[types.NamespacedName]struct{}{}
	}
}

// link adds (or, with add false, removes) name under every key of c. Caller holds mu.
func (x *claimIndex) link(name types.NamespacedName, c *bundleClaim, add bool) {
	for _, k := range keysOf(c) {
		set := x.holders[k]
		if add {
			if set == nil {
				set = map[types.NamespacedName]struct{}{}
				x.holders[k] = set
			}
			set[name] = struct{}{}
			continue
		}
		delete(set, name)
		if len(set) == 0 {
			delete(x.holders, k)
		}
	}
}

// sharersAfter lists the deployments other than name holding any of keys whose claim comes
// after first (the only ones whose judgement a change of first can alter). Caller holds mu.
func (x *claimIndex) sharersAfter(name types.NamespacedName, first bundleClaim, keys []string) []types.NamespacedName {
	seen := map[types.NamespacedName]bool{name: true}
	var out []types.NamespacedName
	for _, k := range keys {
		for n := range x.holders[k] {
			if seen[n] {
				continue
			}
			seen[n] = true
			if e := x.entries[n]; e != nil && first.before(e.claim) {
				out = append(out, n)
			}
		}
	}
	return out
}

// observe records sd as the informer (or a List) sees it and returns the deployments to
// re-check: those after it that share a key it gained or gave up. A deployment being deleted
// holds nothing.
func (x *claimIndex) observe(sd *v1.ServiceDeployment) []types.NamespacedName {
	name := client.ObjectKeyFromObject(sd)
	if !sd.DeletionTimestamp.IsZero() {
		return x.forget(name)
	}
	authority, _ := normalizeEndpoint(sd.Spec.MCPConnection.URL)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.init()
	e := x.entries[name]
	if e != nil && e.uid == sd.UID && e.gen == sd.Generation && e.profile == sd.Spec.ProfileRef.Name {
		return nil // a status or metadata update: the claim is unchanged
	}
	var old []string
	next := &claimEntry{uid: sd.UID, gen: sd.Generation, profile: sd.Spec.ProfileRef.Name, dirty: true,
		claim: bundleClaim{Key: name.Namespace + "/" + name.Name, Created: sd.CreationTimestamp, Provider: sd.Spec.ProviderID, Authority: authority}}
	if e != nil {
		old = keysOf(&e.claim)
		x.link(name, &e.claim, false)
		next.version = e.version + 1
		if e.uid == sd.UID {
			// Keep the derived operations until the re-derivation replaces them: a spec change
			// never frees a key before the pass that re-derives it.
			next.claim.Operations = e.claim.Operations
		}
	}
	x.entries[name] = next
	x.pending[name] = struct{}{}
	x.link(name, &next.claim, true)
	return x.sharersAfter(name, next.claim, append(old, keysOf(&next.claim)...))
}

// forget drops name and returns the deployments after it that shared a key with it.
func (x *claimIndex) forget(name types.NamespacedName) []types.NamespacedName {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.entries[name]
	if e == nil {
		return nil
	}
	x.link(name, &e.claim, false)
	delete(x.entries, name)
	delete(x.pending, name)
	return x.sharersAfter(name, e.claim, keysOf(&e.claim))
}

// markProfile marks the deployments of namespace ns referencing profile for derivation.
func (x *claimIndex) markProfile(names []types.NamespacedName) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, n := range names {
		if e := x.entries[n]; e != nil {
			e.dirty = true
			e.version++
			x.pending[n] = struct{}{}
		}
	}
}

// dirtyEntries lists the entries marked for derivation with their versions. Caller holds mu.
func (x *claimIndex) dirtyEntries() map[types.NamespacedName]uint64 {
	out := make(map[types.NamespacedName]uint64, len(x.pending))
	for n := range x.pending {
		if e := x.entries[n]; e != nil && e.dirty {
			out[n] = e.version
		} else {
			delete(x.pending, n)
		}
	}
	return out
}

// earlierSharing returns the claims of the deployments before self that share a key with it.
func (x *claimIndex) earlierSharing(self bundleClaim) []bundleClaim {
	x.mu.Lock()
	defer x.mu.Unlock()
	seen := map[string]bool{self.Key: true}
	var out []bundleClaim
	for _, k := range keysOf(&self) {
		for n := range x.holders[k] {
			e := x.entries[n]
			if e == nil || seen[e.claim.Key] {
				continue
			}
			seen[e.claim.Key] = true
			if e.claim.before(self) {
				c := e.claim
				c.Operations = slices.Clone(c.Operations)
				out = append(out, c)
			}
		}
	}
	// A stable order, so the judgement does not depend on map iteration.
	slices.SortFunc(out, func(a, b bundleClaim) int {
		if a.before(b) {
			return -1
		}
		return 1
	})
	return out
}

// size is the number of deployments in the index.
func (x *claimIndex) size() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.entries)
}

// deriveClaims derives the operation keys of every entry marked for derivation, from the
// deployment and its profile in the cache (read-only views), and re-enqueues the deployments
// after each one whose keys changed. Operations count only when the profile is Ready and
// resolves, as they always have. A later deployment that gains the same key in the same drain
// is not re-enqueued by it: it was marked by its own event, which enqueued it, and every pass
// drains before it judges.
func (r *DeploymentReconciler) deriveClaims(ctx context.Context) error {
	x := &r.claims
	x.drainMu.Lock()
	defer x.drainMu.Unlock()
	x.mu.Lock()
	dirty := x.dirtyEntries()
	x.mu.Unlock()
	var requeue []types.NamespacedName
	defer func() { r.requeue(ctx, requeue) }()
	for name, version := range dirty {
		sd := &v1.ServiceDeployment{}
		if err := r.Client.Get(ctx, name, sd, client.UnsafeDisableDeepCopy); err != nil {
			if apierrors.IsNotFound(err) {
				requeue = append(requeue, x.forget(name)...)
				continue
			}
			return err
		}
		prof := &v1.McpServiceProfile{}
		pkey := types.NamespacedName{Namespace: sd.Namespace, Name: sd.Spec.ProfileRef.Name}
		if err := r.Client.Get(ctx, pkey, prof, client.UnsafeDisableDeepCopy); err != nil {
			if !apierrors.IsNotFound(err) {
				return err
			}
			prof = nil
		}
		memo := claimMemoKey{generation: sd.Generation}
		if prof != nil {
			memo.profileUID, memo.profileGeneration, memo.profileDigest = prof.UID, prof.Generation, prof.Status.SnapshotDigest
			ready := meta.FindStatusCondition(prof.Status.Conditions, v1.ConditionReady)
			memo.profileReady = ready != nil && ready.Status == metav1.ConditionTrue
		}
		x.mu.Lock()
		e := x.entries[name]
		if e == nil || e.version != version {
			x.mu.Unlock()
			continue // changed meanwhile: derived again by the next pass
		}
		if e.derived && e.memo == memo {
			e.dirty = false
			delete(x.pending, name)
			x.mu.Unlock()
			continue
		}
		x.mu.Unlock()
		ops := r.otherClaim(ctx, sd, prof).Operations
		x.mu.Lock()
		x.derivations++
		e = x.entries[name]
		if e != nil && e.version == version {
			old := keysOf(&e.claim)
			x.link(name, &e.claim, false)
			e.claim.Operations = ops
			x.link(name, &e.claim, true)
			e.memo, e.derived, e.dirty = memo, true, false
			delete(x.pending, name)
			if !slices.Equal(old, keysOf(&e.claim)) {
				requeue = append(requeue, x.sharersAfter(name, e.claim, append(old, keysOf(&e.claim)...))...)
			}
		}
		x.mu.Unlock()
	}
	return nil
}

// observeAll feeds the index from one List of every deployment: the path of a reconciler that
// was not set up with a manager (no informer feeds it), e.g. a reconciler driven directly.
func (r *DeploymentReconciler) observeAll(ctx context.Context) error {
	var list v1.ServiceDeploymentList
	if err := r.Client.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	present := make(map[types.NamespacedName]bool, len(list.Items))
	for i := range list.Items {
		present[client.ObjectKeyFromObject(&list.Items[i])] = true
		r.claims.observe(&list.Items[i])
	}
	r.claims.mu.Lock()
	var gone []types.NamespacedName
	for n := range r.claims.entries {
		if !present[n] {
			gone = append(gone, n)
		}
	}
	r.claims.mu.Unlock()
	for _, n := range gone {
		r.claims.forget(n)
	}
	return nil
}

// requeue hands names to the controller's queue (through the claim channel source); without a
// manager there is no queue and the caller drives the passes. It gives up when ctx ends (the
// manager is stopping and no longer drains the channel).
func (r *DeploymentReconciler) requeue(ctx context.Context, names []types.NamespacedName) {
	if r.claimEvents == nil {
		return
	}
	for _, n := range names {
		sd := &v1.ServiceDeployment{}
		sd.Namespace, sd.Name = n.Namespace, n.Name
		select {
		case r.claimEvents <- event.TypedGenericEvent[*v1.ServiceDeployment]{Object: sd}:
		case <-ctx.Done():
			return
		}
	}
}

// claimWatch is the ServiceDeployment event handler that feeds the claim index: on every add,
// update (old keys and new) and delete it records the claim and enqueues the deployments after
// it that share a key it gained or gave up.
func (r *DeploymentReconciler) claimWatch() handler.TypedEventHandler[*v1.ServiceDeployment, reconcile.Request] {
	add := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], names []types.NamespacedName) {
		for _, n := range names {
			q.Add(reconcile.Request{NamespacedName: n})
		}
	}
	return handler.TypedFuncs[*v1.ServiceDeployment, reconcile.Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[*v1.ServiceDeployment], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, r.claims.observe(e.Object))
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[*v1.ServiceDeployment], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, r.claims.observe(e.ObjectNew))
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[*v1.ServiceDeployment], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, r.claims.forget(client.ObjectKeyFromObject(e.Object)))
		},
	}
}
