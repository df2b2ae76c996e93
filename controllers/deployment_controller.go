package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/egress/k8sbinding"
	"github.com/b10x/connector-mcp/snapshot"
)

// Index keys registered by SetupWithManager.
const (
	indexProfileRef = "spec.profileRef.name"
	indexGrantRef   = "spec.operations.grantRefs"
)

// DeploymentReconciler runs the activation pipeline of ServiceDeployments: ProfileVerified,
// Bound, SnapshotFrozen, SnapshotMatched, then Ready with the frozen snapshot digest active.
type DeploymentReconciler struct {
	// Client reads (from the cache) and patches deployments, profiles and RBAC objects.
	Client client.Client
	// SecretReader reads the credential Secret by name: the manager's cache, whose Secret
	// informer sees only Secrets labelled connectors.b10x.io/credential=true. A Secret is read
	// and spent only under k8sbinding.CheckSecret. Ignored when Binder is set (Binder.Secrets
	// is used).
	SecretReader client.Reader
	// Binder is the shared construction of endpoint bindings (also the Freezer's): the bind
	// stage checks the namespace's egress ceiling and literal addresses with it before anything
	// is dialed, and the freeze stage reads the credential through it. Nil: a Binder over
	// SecretReader (credentials) and Client (CA bundle ConfigMaps) with an empty ceiling and no
	// cluster deny list.
	Binder *k8sbinding.Binder
	// CredentialHashKey is the operator-held HMAC key of status.credentialHash (at least
	// CredentialHashKeyMinBytes bytes). Required when a deployment names a credential.
	CredentialHashKey []byte
	// Events records events whose reasons equal condition reasons. Optional.
	Events events.EventRecorder
	// Resolver verifies the referenced profile's source (memoized).
	Resolver *Resolver
	// Freezer lists the live tools through egress.
	Freezer Freezer
	// Clock is injected for tests; nil means the real clock.
	Clock clock.PassiveClock
	// ReverifyInterval is the period of live re-verification (re-freeze); jittered per object.
	ReverifyInterval time.Duration
	// ReverifyJitter is the maximum extra fraction of ReverifyInterval (e.g. 0.1).
	ReverifyJitter float64
	// FreezeTimeout bounds one live freeze.
	FreezeTimeout time.Duration
	// RetryInterval is the first step of the exponential, jittered retry of a transient failure
	// (see RetryBackoff); zero means 30 s.
	RetryInterval time.Duration
	// Metrics is optional.
	Metrics *Metrics
	// DriftNotifier, optional, is told of every McpSnapshotReview written (review.go).
	DriftNotifier DriftNotifier
	// MaxConcurrentReconciles bounds parallel passes (freezes wait on the network); zero means 1.
	MaxConcurrentReconciles int
	// Shard selects the deployments this manager reconciles (--watch-label-selector); nil means
	// all. Collisions are judged across shards: the claim index holds every deployment of the
	// cluster, whichever shard reconciles it.
	Shard labels.Selector
	// RetryMaxInterval caps the exponential retry delay of transient failures (zero:
	// DefaultRetryMaxInterval). See RetryBackoff.
	RetryMaxInterval time.Duration

	// claims is the claim index of every deployment (see claims.go).
	claims claimIndex
	// claimEvents re-enqueues deployments whose judgement a derivation changed; nil without a
	// manager.
	claimEvents chan event.TypedGenericEvent[*v1.ServiceDeployment]
	// informerFed is true when the ServiceDeployment informer feeds the claim index.
	informerFed bool
	// retries counts consecutive transient failures per deployment (see RetryBackoff).
	retries retryCounter
	// written remembers the last status written per deployment (stale-cache repeats).
	written writtenStatus
}

// +kubebuilder:rbac:groups=connectors.b10x.io,resources=servicedeployments,verbs=get;list;watch
// +kubebuilder:rbac:groups=connectors.b10x.io,resources=servicedeployments/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings;roles;clusterroles,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=services,verbs=get
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=list
// +kubebuilder:rbac:groups=networking.k8s.io,resources=servicecidrs,verbs=list
// +kubebuilder:rbac:groups=connectors.b10x.io,resources=mcptrustpolicies,verbs=get;list;watch

// SetupWithManager registers the reconciler, its indexes and its watches: deployments,
// the profiles they reference, the RoleBindings and Roles their grants name, and the other
// deployments they collide with.
func (r *DeploymentReconciler) SetupWithManager(mgr ctrl.Manager) error {
	ctx := context.Background()
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &v1.ServiceDeployment{}, indexProfileRef, profileRefIndex); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &v1.ServiceDeployment{}, indexGrantRef, grantRefIndex); err != nil {
		return err
	}
	r.claimEvents = make(chan event.TypedGenericEvent[*v1.ServiceDeployment], 1024)
	r.informerFed = true
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1.ServiceDeployment{}, builder.WithPredicates(shardPredicate(r.Shard))).
		Named("servicedeployment").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.MaxConcurrentReconciles, 1)}).
		Watches(&v1.McpServiceProfile{}, handler.EnqueueRequestsFromMapFunc(r.byProfile)).
		Watches(&rbacv1.RoleBinding{}, handler.EnqueueRequestsFromMapFunc(r.byGrant)).
		Watches(&rbacv1.Role{}, handler.EnqueueRequestsFromMapFunc(r.inNamespace)).
		WatchesRawSource(source.Kind(mgr.GetCache(), &v1.ServiceDeployment{}, r.claimWatch())).
		WatchesRawSource(source.Channel(r.claimEvents, &handler.TypedEnqueueRequestForObject[*v1.ServiceDeployment]{})).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.byCredential)).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.byCABundle)).
		Watches(&v1.McpTrustPolicy{}, handler.EnqueueRequestsFromMapFunc(r.withAllowCIDRs),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})). // not on its own status writes
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.withAllowCIDRs)).
		Complete(r)
}

// profileRefIndex indexes deployments by the profile they reference.
func profileRefIndex(o client.Object) []string {
	return []string{o.(*v1.ServiceDeployment).Spec.ProfileRef.Name}
}

// grantRefIndex indexes deployments by the RoleBindings their grants name.
func grantRefIndex(o client.Object) []string {
	var out []string
	for _, op := range o.(*v1.ServiceDeployment).Spec.Operations {
		for _, g := range op.GrantRefs {
			if !slices.Contains(out, g) {
				out = append(out, g)
			}
		}
	}
	return out
}

func (r *DeploymentReconciler) byProfile(ctx context.Context, o client.Object) []reconcile.Request {
	var list v1.ServiceDeploymentList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{indexProfileRef: o.GetName()}); err != nil {
		return nil
	}
	reqs := requests(list.Items)
	// Their claims' operations depend on the profile: derive them again before the next judgement.
	names := make([]types.NamespacedName, len(reqs))
	for i := range reqs {
		names[i] = reqs[i].NamespacedName
	}
	r.claims.markProfile(names)
	return reqs
}

func (r *DeploymentReconciler) byGrant(ctx context.Context, o client.Object) []reconcile.Request {
	var list v1.ServiceDeploymentList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{indexGrantRef: o.GetName()}); err != nil {
		return nil
	}
	return requests(list.Items)
}

func (r *DeploymentReconciler) inNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	var list v1.ServiceDeploymentList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	return requests(list.Items)
}

// byCredential enqueues the deployments of the Secret's namespace that name it (the manager
// sees only opted-in Secrets, so this fires on creation, labelling, rotation and unlabelling).
func (r *DeploymentReconciler) byCredential(ctx context.Context, o client.Object) []reconcile.Request {
	var list v1.ServiceDeploymentList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if ref := list.Items[i].Spec.MCPConnection.CredentialRef; ref != nil && ref.Name == o.GetName() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return out
}

// byCABundle enqueues the deployments of the ConfigMap's namespace that name it as their CA
// bundle (the manager sees only ConfigMaps labelled connectors.b10x.io/ca-bundle=true, so this
// fires on creation, labelling, rotation and unlabelling).
func (r *DeploymentReconciler) byCABundle(ctx context.Context, o client.Object) []reconcile.Request {
	var list v1.ServiceDeploymentList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if ref := list.Items[i].Spec.MCPConnection.CABundleRef; ref != nil && ref.Name == o.GetName() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return out
}

// withAllowCIDRs enqueues the deployments that request private ranges (in the namespace, for a
// Namespace event; everywhere, for an McpTrustPolicy event), so a lowered ceiling is applied at
// once.
func (r *DeploymentReconciler) withAllowCIDRs(ctx context.Context, o client.Object) []reconcile.Request {
	var opts []client.ListOption
	if _, ok := o.(*corev1.Namespace); ok {
		opts = append(opts, client.InNamespace(o.GetName()))
	}
	var list v1.ServiceDeploymentList
	if err := r.Client.List(ctx, &list, opts...); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if len(list.Items[i].Spec.MCPConnection.Egress.AllowCIDRs) > 0 {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return out
}

// binder returns the shared binding construction.
func (r *DeploymentReconciler) binder() *k8sbinding.Binder {
	if r.Binder != nil {
		return r.Binder
	}
	return &k8sbinding.Binder{Secrets: r.SecretReader, ConfigMaps: r.Client}
}

// bindingRequest is the k8sbinding request of sd's mcp_connection.
func bindingRequest(sd *v1.ServiceDeployment) k8sbinding.Request {
	req := k8sbinding.Request{Namespace: sd.Namespace, URL: sd.Spec.MCPConnection.URL, AllowCIDRs: sd.Spec.MCPConnection.Egress.AllowCIDRs}
	if ref := sd.Spec.MCPConnection.CredentialRef; ref != nil {
		req.Credential = &egress.CredentialRef{Name: ref.Name, Key: ref.Key}
	}
	if ref := sd.Spec.MCPConnection.CABundleRef; ref != nil {
		req.CABundle = &k8sbinding.CABundleRef{Name: ref.Name, Key: ref.Key}
	}
	return req
}

func requests(items []v1.ServiceDeployment) []reconcile.Request {
	out := make([]reconcile.Request, len(items))
	for i := range items {
		out[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&items[i])}
	}
	return out
}

// deploymentStages are the stage conditions in pipeline order.
var deploymentStages = []string{TypeProfileVerified, TypeBound, TypeSnapshotFrozen, TypeSnapshotMatched}

// pass is the state of one reconcile pass.
type pass struct {
	sd       *v1.ServiceDeployment
	now      time.Time
	resolved *Resolved
	credHash string
	live     *snapshot.ToolSnapshot
	drift    *snapshot.Diff
	froze    bool
	// reverify is the due re-verification request of the ReverifyRequestedAtAnnotation, if any.
	reverify bool
	// reverifyWait is how long until a request stamped slightly in the future becomes due.
	reverifyWait time.Duration
	// profileUnseen is true when the referenced profile exists in this manager's shard, was
	// created less than ProfileUnseenGrace ago and its reconciler has not written its status
	// yet (no condition, observedGeneration 0).
	profileUnseen bool
}

// Reconcile runs the activation pipeline once and writes status once, only when it changed.
func (r *DeploymentReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if !r.informerFed {
		if err := r.observeAll(ctx); err != nil {
			return ctrl.Result{}, err
		}
	}
	// Every claim the cache holds is derived before anything is judged (usually none is due).
	if err := r.deriveClaims(ctx); err != nil {
		return ctrl.Result{}, err
	}
	// Read-only cache views: the deployment, its profile and its grants are read without a deep
	// copy (client.UnsafeDisableDeepCopy), so a pass allocates the same whatever the cache holds.
	// The rule: such an object is never mutated, nor handed to code that may mutate it. The
	// cached deployment serves as orig; the pass works on its own copy, sd.
	cached := &v1.ServiceDeployment{}
	if err := r.Client.Get(ctx, req.NamespacedName, cached, client.UnsafeDisableDeepCopy); err != nil {
		if apierrors.IsNotFound(err) {
			r.retries.reset(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	sd := cached.DeepCopy()
	if !inShard(r.Shard, sd) {
		return ctrl.Result{}, nil // another shard's manager reconciles it
	}
	// Nothing outside the cluster needs cleanup, so there is no finalizer; an in-flight freeze
	// is bounded by FreezeTimeout and cancelled on shutdown.
	if !sd.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	if sd.Spec.Suspend {
		return ctrl.Result{}, r.suspend(ctx, sd)
	}
	orig := cached // read-only
	p := &pass{sd: sd, now: r.now()}
	p.reverify, p.reverifyWait = ReverifyRequested(sd, p.now)

	var failed *StageError
	for _, stage := range []func(context.Context, *pass) *StageError{r.verifyProfile, r.bind, r.freeze, r.match} {
		if failed = stage(ctx, p); failed != nil {
			break
		}
	}
	o := outcome{stages: deploymentStages, failed: failed, readyReason: ReasonActivated}
	st := &sd.Status
	if failed == nil {
		st.ActiveSnapshotDigest = p.resolved.Snapshot.Digest
		st.CandidateSnapshotDigest, st.Drift = "", nil
		st.ExposedOperations = exposed(sd)
		o.readyMessage = fmt.Sprintf("active snapshot %s; %d of %d operations exposed", st.ActiveSnapshotDigest, st.ExposedOperations, len(sd.Spec.Operations))
	} else {
		// Fail closed: nothing is active unless every stage passed in this pass.
		st.ActiveSnapshotDigest, st.ExposedOperations = "", 0
		if failed.Reason != ReasonSnapshotDrift {
			st.CandidateSnapshotDigest, st.Drift = "", nil
		}
	}
	applyConditions(&st.Conditions, sd.Generation, p.now, o)
	if o.terminal() {
		st.ObservedGeneration = sd.Generation
	}

	if waitsForProfile(orig, failed, p) {
		// A new deployment whose profile was not looked at yet: the profile's first status
		// write enqueues it (byProfile), so no transient ProfileNotReady is written in between
		// (one write per object to Ready). The retry is a safety net only.
		return r.result(sd, failed), nil
	}
	if !equality.Semantic.DeepEqual(orig.Status, sd.Status) {
		if r.written.staleRepeat(orig, sd) {
			// This very status was written by the previous pass and the cache has not caught
			// up: its watch event brings the next pass. No second write, no second event.
			return r.result(sd, failed), nil
		}
		// Optimistic lock: a pass that read a stale cached object (its own previous write not yet
		// seen) must not overwrite the newer status nor announce a second time. The watch event of
		// the newer object brings the next pass.
		if err := r.Client.Status().Patch(ctx, sd, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			if apierrors.IsNotFound(err) {
				return ctrl.Result{}, nil
			}
			if apierrors.IsConflict(err) {
				return ctrl.Result{RequeueAfter: r.RetryInterval}, nil
			}
			return ctrl.Result{}, err
		}
		r.written.record(sd)
		r.announce(ctx, sd, orig, o, p)
	}
	res := r.result(sd, failed)
	if w := p.reverifyWait; w > 0 && (res.RequeueAfter == 0 || w < res.RequeueAfter) {
		res.RequeueAfter = w
	}
	return res, nil
}

// ProfileUnseenGrace is how long after a profile's creation a new deployment referencing it
// waits, without writing a status, for the profile's first status (see waitsForProfile): long
// enough for a manager working through thousands of new profiles (with 5,000 created at once,
// 30 s was not). A profile outside this manager's shard is never waited for; the grace bounds
// only a profile reconciler that is stuck.
const ProfileUnseenGrace = 10 * time.Minute

// waitsForProfile reports a pass that should write nothing: the deployment has no status yet and
// failed only because its profile, which exists, has not been reconciled yet.
func waitsForProfile(orig *v1.ServiceDeployment, failed *StageError, p *pass) bool {
	return failed != nil && failed.Reason == ReasonProfileNotReady && failed.Transient && p.profileUnseen &&
		len(orig.Status.Conditions) == 0 && orig.Status.ObservedGeneration == 0
}

// result schedules the next pass: an exponential, jittered retry for transient failures, else the next jittered
// re-verification of the live server.
func (r *DeploymentReconciler) result(sd *v1.ServiceDeployment, failed *StageError) ctrl.Result {
	name := client.ObjectKeyFromObject(sd)
	if failed != nil && failed.Transient {
		n := r.retries.next(name)
		maxDelay := r.RetryMaxInterval
		if maxDelay <= 0 {
			maxDelay = DefaultRetryMaxInterval
		}
		return ctrl.Result{RequeueAfter: RetryBackoff(r.retryInterval(), maxDelay, n, retryJitter(sd.UID, n))}
	}
	r.retries.reset(name)
	if r.ReverifyInterval <= 0 || sd.Status.LastFrozenTime == nil {
		return ctrl.Result{}
	}
	next := NextVerification(sd.Status.LastFrozenTime.Time, r.ReverifyInterval, r.ReverifyJitter, string(sd.UID))
	d := next.Sub(r.now())
	if d < time.Second {
		d = time.Second
	}
	return ctrl.Result{RequeueAfter: d}
}

// verifyProfile: the referenced profile exists, is verified for its current generation, and
// its document resolves to the verified snapshot digest.
func (r *DeploymentReconciler) verifyProfile(ctx context.Context, p *pass) *StageError {
	prof := &v1.McpServiceProfile{}
	key := types.NamespacedName{Namespace: p.sd.Namespace, Name: p.sd.Spec.ProfileRef.Name}
	// A read-only cache view (see Reconcile): the Resolver, too, treats prof as read-only.
	if err := r.Client.Get(ctx, key, prof, client.UnsafeDisableDeepCopy); err != nil {
		if apierrors.IsNotFound(err) {
			return &StageError{Condition: TypeProfileVerified, Reason: ReasonProfileNotFound, Transient: true,
				Message: fmt.Sprintf("McpServiceProfile %q does not exist in this namespace", key.Name)}
		}
		return retry(TypeProfileVerified, ReasonProfileNotReady, err, "McpServiceProfile %q could not be read", key.Name)
	}
	ready := meta.FindStatusCondition(prof.Status.Conditions, TypeReady)
	// Unseen: no status yet, in this manager's shard (its reconciler will write one), and young
	// (a profile nobody reconciles must not leave the deployment without a status for long).
	p.profileUnseen = len(prof.Status.Conditions) == 0 && prof.Status.ObservedGeneration == 0 && inShard(r.Shard, prof) &&
		p.now.Sub(prof.CreationTimestamp.Time) < ProfileUnseenGrace
	if ready == nil || ready.Status != metav1.ConditionTrue || prof.Status.ObservedGeneration != prof.Generation {
		serr := &StageError{Condition: TypeProfileVerified, Reason: ReasonProfileNotReady, Transient: true,
			Message: fmt.Sprintf("McpServiceProfile %q is not verified", key.Name)}
		if stalled := meta.FindStatusCondition(prof.Status.Conditions, TypeStalled); stalled != nil && stalled.Status == metav1.ConditionTrue &&
			prof.Status.ObservedGeneration == prof.Generation {
			serr.Transient = false
			serr.Message += " (" + stalled.Reason + ")"
		}
		return serr
	}
	res, serr := r.Resolver.Resolve(ctx, prof)
	if serr != nil {
		return &StageError{Condition: TypeProfileVerified, Reason: ReasonProfileNotReady, Transient: serr.Transient, Err: serr,
			Message: fmt.Sprintf("McpServiceProfile %q does not verify: %s", key.Name, serr.Reason)}
	}
	if res.Snapshot.Digest != prof.Status.SnapshotDigest {
		return &StageError{Condition: TypeProfileVerified, Reason: ReasonProfileNotReady, Transient: true,
			Message: fmt.Sprintf("McpServiceProfile %q is being re-verified", key.Name)}
	}
	p.resolved = res
	return nil
}

// bind runs the binding checks, the grant checks against RBAC and the collision rules.
func (r *DeploymentReconciler) bind(ctx context.Context, p *pass) *StageError {
	sd, doc := p.sd, p.resolved.Document
	if serr := CheckBindings(doc, &sd.Spec); serr != nil {
		return serr
	}
	var grants []string
	for _, op := range sd.Spec.Operations {
		for _, g := range op.GrantRefs {
			if !slices.Contains(grants, g) {
				grants = append(grants, g)
			}
		}
	}
	slices.Sort(grants)
	for _, g := range grants {
		if serr := r.checkGrant(ctx, sd, g); serr != nil {
			return serr
		}
	}
	if serr := CheckEndpointURL("spec.mcpConnection.url", sd.Spec.MCPConnection.URL); serr != nil {
		return serr
	}
	authority, err := NormalizeEndpoint(sd.Spec.MCPConnection.URL)
	if err != nil {
		return refuse(TypeBound, ReasonEndpointRefused, "%s", err.Error())
	}
	// The namespace's egress ceiling and the always-denied literal addresses, every pass and
	// before anything is dialed (the credential is read by the freeze stage).
	req := bindingRequest(sd)
	req.Credential = nil
	if err := r.binder().Check(ctx, req); err != nil {
		return BindingStageError(TypeBound, err)
	}
	self := r.claim(sd, authority, doc)
	// Only the claims sharing a full claim key with this one can collide with it; they come
	// from the claim index, derived once per deployment generation and profile.
	return FindCollision(self, r.claims.earlierSharing(self))
}

// checkGrant checks that RoleBinding name exists in the deployment's namespace and that its
// role allows invoke on this deployment.
func (r *DeploymentReconciler) checkGrant(ctx context.Context, sd *v1.ServiceDeployment, name string) *StageError {
	// Read-only cache views (see Reconcile).
	rb := &rbacv1.RoleBinding{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: sd.Namespace, Name: name}, rb, client.UnsafeDisableDeepCopy); err != nil {
		if apierrors.IsNotFound(err) {
			return refuse(TypeBound, ReasonGrantNotFound, "grant RoleBinding %q does not exist in this namespace", name)
		}
		return retry(TypeBound, ReasonProgressing, err, "grant RoleBinding %q could not be read", name)
	}
	var rules []rbacv1.PolicyRule
	var err error
	switch rb.RoleRef.Kind {
	case "Role":
		role := &rbacv1.Role{}
		err = r.Client.Get(ctx, types.NamespacedName{Namespace: sd.Namespace, Name: rb.RoleRef.Name}, role, client.UnsafeDisableDeepCopy)
		rules = role.Rules
	case "ClusterRole":
		role := &rbacv1.ClusterRole{}
		err = r.Client.Get(ctx, types.NamespacedName{Name: rb.RoleRef.Name}, role, client.UnsafeDisableDeepCopy)
		rules = role.Rules
	default:
		return refuse(TypeBound, ReasonGrantDenied, "grant RoleBinding %q refers to an unknown role kind", name)
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			return refuse(TypeBound, ReasonGrantNotFound, "the %s %q of grant RoleBinding %q does not exist", rb.RoleRef.Kind, rb.RoleRef.Name, name)
		}
		return retry(TypeBound, ReasonProgressing, err, "the role of grant RoleBinding %q could not be read", name)
	}
	if !RulesAllowInvoke(rules, sd.Name) {
		return refuse(TypeBound, ReasonGrantDenied, "grant RoleBinding %q does not allow verb %q on %s.%s %q", name, InvokeVerb, ServiceDeploymentsResource, v1.GroupVersion.Group, sd.Name)
	}
	return nil
}

// claim builds what sd holds in the bundle.
func (r *DeploymentReconciler) claim(sd *v1.ServiceDeployment, authority string, doc *v1.ProfileDocument) Claim {
	c := Claim{Key: sd.Namespace + "/" + sd.Name, Created: sd.CreationTimestamp, Provider: sd.Spec.ProviderID, Authority: authority}
	if doc != nil {
		for _, op := range sd.Spec.Operations {
			c.Operations = append(c.Operations, doc.Service.ConnectionRef+"/"+op.OperationRef)
		}
	}
	return c
}

// otherClaim builds another deployment's claim; its operations count only when its profile is
// verified (resolved from the memo, so a collision check never fetches a failing pack).
func (r *DeploymentReconciler) otherClaim(ctx context.Context, sd *v1.ServiceDeployment, prof *v1.McpServiceProfile) Claim {
	authority, _ := NormalizeEndpoint(sd.Spec.MCPConnection.URL)
	var doc *v1.ProfileDocument
	if prof != nil {
		if ready := meta.FindStatusCondition(prof.Status.Conditions, TypeReady); ready != nil && ready.Status == metav1.ConditionTrue {
			if res, serr := r.Resolver.Resolve(ctx, prof); serr == nil {
				doc = res.Document
			}
		}
	}
	return r.claim(sd, authority, doc)
}

// freeze reads the credential fingerprint and, when due, lists the live tools through egress.
func (r *DeploymentReconciler) freeze(ctx context.Context, p *pass) *StageError {
	sd := p.sd
	if sd.Spec.MCPConnection.CredentialRef != nil {
		val, err := r.binder().Credential(ctx, bindingRequest(sd))
		if err != nil {
			return BindingStageError(TypeSnapshotFrozen, err)
		}
		if len(r.CredentialHashKey) < CredentialHashKeyMinBytes {
			clear(val)
			return refuse(TypeSnapshotFrozen, ReasonCredentialRefused, "the operator has no credential hash key")
		}
		p.credHash = CredentialHash(r.CredentialHashKey, string(sd.UID), val)
		clear(val)
	}
	st := &sd.Status
	if !r.freezeDue(p) {
		return nil
	}
	fctx := ctx
	if r.FreezeTimeout > 0 {
		var cancel context.CancelFunc
		fctx, cancel = context.WithTimeout(ctx, r.FreezeTimeout)
		defer cancel()
	}
	start := time.Now()
	live, err := r.Freezer.Freeze(fctx, FreezeRequest{Namespace: sd.Namespace, Name: sd.Name, URL: sd.Spec.MCPConnection.URL,
		Credential: sd.Spec.MCPConnection.CredentialRef, AllowCIDRs: sd.Spec.MCPConnection.Egress.AllowCIDRs,
		CABundle: sd.Spec.MCPConnection.CABundleRef})
	if r.Metrics != nil {
		result := "ok"
		if err != nil {
			result = "error"
		}
		r.Metrics.FreezeDuration.WithLabelValues(result).Observe(time.Since(start).Seconds())
	}
	if err != nil {
		var serr *StageError
		if errors.As(err, &serr) {
			return serr
		}
		return retry(TypeSnapshotFrozen, ReasonServerUnreachable, err, "the live tool list of %s could not be read; retrying", SanitizeURL(sd.Spec.MCPConnection.URL))
	}
	p.live, p.froze = live, true
	t := metav1.NewTime(p.now)
	st.LastFrozenTime = &t
	st.CredentialHash = p.credHash
	st.ProfileDigest = p.resolved.ProfileDigest
	return nil
}

// freezeDue decides whether this pass must freeze the live server: never frozen, re-verification
// freezeDue decides whether this pass must freeze the live server: never frozen, a re-verification
// requested (ReverifyRequested) or due, the profile, credential or spec changed since the last freeze, or the last pass ended
func (r *DeploymentReconciler) freezeDue(p *pass) bool {
	st := &p.sd.Status
	switch {
	case p.reverify,
		st.LastFrozenTime == nil,
		st.ObservedGeneration != p.sd.Generation,
		st.ProfileDigest != p.resolved.ProfileDigest,
		st.CredentialHash != p.credHash,
		st.ActiveSnapshotDigest == "" && st.CandidateSnapshotDigest == "":
		return true
	case r.ReverifyInterval > 0:
		return !p.now.Before(NextVerification(st.LastFrozenTime.Time, r.ReverifyInterval, r.ReverifyJitter, string(p.sd.UID)))
	}
	return false
}

// MaxReverifyRequestSkew is how far in the future a ReverifyRequestedAtAnnotation may be (clock
// skew between the requester and the manager): such a request becomes due when its time comes.
// A request further in the future is ignored, so an annotation cannot keep the reconciler
// freezing in a loop.
const MaxReverifyRequestSkew = time.Minute

// ReverifyRequested reads the deployment's ReverifyRequestedAtAnnotation at now: due reports a
// request newer than status.lastFrozenTime whose time has come; wait > 0 is the time until a
// request stamped slightly in the future (at most MaxReverifyRequestSkew) comes due. The request
// time is rounded up to the whole second, because status.lastFrozenTime is stored in whole
// seconds: a freeze at or after the request always satisfies it. A value that is not RFC 3339
// is ignored.
func ReverifyRequested(sd *v1.ServiceDeployment, now time.Time) (due bool, wait time.Duration) {
	raw, ok := sd.Annotations[v1.ReverifyRequestedAtAnnotation]
	if !ok {
		return false, 0
	}
	at, err := time.Parse(time.RFC3339Nano, raw)
	if err != nil {
		return false, 0
	}
	if t := at.Truncate(time.Second); t.Before(at) {
		at = t.Add(time.Second)
	}
	if last := sd.Status.LastFrozenTime; last != nil && !at.After(last.Time) {
		return false, 0
	}
	if at.After(now) {
		if at.Sub(now) > MaxReverifyRequestSkew {
			return false, 0
		}
		return false, at.Sub(now)
	}
	return true, 0
}

// match compares the live snapshot (or, when no freeze was due, the recorded outcome of the last
// freeze) with the reviewed snapshot.
func (r *DeploymentReconciler) match(ctx context.Context, p *pass) *StageError {
	st := &p.sd.Status
	if !p.froze {
		if st.CandidateSnapshotDigest != "" && st.Drift != nil {
			msg := "the live tool list differs from the reviewed snapshot"
			if c := meta.FindStatusCondition(st.Conditions, TypeSnapshotMatched); c != nil && c.Reason == ReasonSnapshotDrift {
				msg = c.Message
			}
			return &StageError{Condition: TypeSnapshotMatched, Reason: ReasonSnapshotDrift, Message: msg}
		}
		return nil
	}
	d := DecideMatch(p.resolved.Snapshot, p.live)
	if d.Matched {
		r.dropReview(ctx, p.sd)
		return nil
	}
	p.drift = &d.Diff
	st.CandidateSnapshotDigest = p.live.Digest
	st.Drift = DriftStatus(d.Diff)
	r.recordReview(ctx, p)
	return refuse(TypeSnapshotMatched, ReasonSnapshotDrift, "%s; candidate %s kept for review", DriftSummary(d.Diff), p.live.Digest)
}

// announce emits an event, logs and counts when the Ready reason changed or drift was found.
func (r *DeploymentReconciler) announce(ctx context.Context, sd, orig *v1.ServiceDeployment, o outcome, p *pass) {
	reason, msg, typ := o.readyReason, o.readyMessage, corev1.EventTypeNormal
	if o.failed != nil {
		reason, msg, typ = o.failed.Reason, o.failed.Message, corev1.EventTypeWarning
	}
	newDrift := p.drift != nil && sd.Status.CandidateSnapshotDigest != orig.Status.CandidateSnapshotDigest
	if reason == readyReason(orig.Status.Conditions) && !newDrift {
		return
	}
	log.FromContext(ctx).Info("Deployment state changed", "reason", reason, "activeSnapshot", sd.Status.ActiveSnapshotDigest, "candidateSnapshot", sd.Status.CandidateSnapshotDigest)
	if r.Events != nil {
		r.Events.Eventf(sd, nil, typ, reason, "Activate", "%s", msg)
	}
	if r.Metrics == nil {
		return
	}
	if o.failed == nil {
		r.Metrics.Activations.Inc()
	} else {
		r.Metrics.Refusals.WithLabelValues("ServiceDeployment", reason).Inc()
	}
	if newDrift {
		r.Metrics.DriftDetections.Inc()
	}
}

func exposed(sd *v1.ServiceDeployment) int32 {
	var n int32
	for _, op := range sd.Spec.Operations {
		if op.Expose {
			n++
		}
	}
	return n
}

func (r *DeploymentReconciler) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

func (r *DeploymentReconciler) retryInterval() time.Duration {
	if r.RetryInterval <= 0 {
		return 30 * time.Second
	}
	return r.RetryInterval
}

// suspend records that sd is suspended, failing closed: nothing is frozen or re-verified while
// spec.suspend is true, so nothing stays active. Ready=False (reason Suspended) for the current
// generation, with Reconciling and Stalled absent, lets GitOps health checks read a suspended
// deployment as settled instead of waiting forever on a stale Ready=True. The stage conditions
// keep the last pass's results. Unchanged status writes nothing.
func (r *DeploymentReconciler) suspend(ctx context.Context, sd *v1.ServiceDeployment) error {
	orig := sd.DeepCopy()
	st := &sd.Status
	st.ActiveSnapshotDigest, st.ExposedOperations = "", 0
	st.ObservedGeneration = sd.Generation
	const msg = "reconciliation is suspended (spec.suspend): nothing is frozen, re-verified or active"
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: TypeReady, Status: metav1.ConditionFalse,
		Reason: ReasonSuspended, Message: msg, ObservedGeneration: sd.Generation, LastTransitionTime: metav1.NewTime(r.now())})
	meta.RemoveStatusCondition(&st.Conditions, TypeReconciling)
	meta.RemoveStatusCondition(&st.Conditions, TypeStalled)
	if equality.Semantic.DeepEqual(orig.Status, sd.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, sd, client.MergeFrom(orig)); err != nil {
		return client.IgnoreNotFound(err)
	}
	if readyReason(orig.Status.Conditions) != ReasonSuspended {
		log.FromContext(ctx).Info("Deployment suspended")
		if r.Events != nil {
			r.Events.Eventf(sd, nil, corev1.EventTypeNormal, ReasonSuspended, "Suspend", "%s", msg)
		}
	}
	return nil
}
