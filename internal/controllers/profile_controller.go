package controllers

import (
	"go.opentelemetry.io/otel/trace"

	"github.com/b10x/connector-mcp/internal/audit"

	"context"
	"fmt"
	"strings"
	"time"

	"github.com/b10x/connector-mcp/internal/tracing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
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

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/activation"
)

// profileConditions are the stage conditions of an McpServiceProfile (run by the Resolver), in order.
var profileConditions = activation.ProfileConditions()

// ProfileReconciler verifies McpServiceProfiles: source verification (pack by digest with a
// provenance policy, or inline where allowed), strict decode and snapshot digest reconstruction.
type ProfileReconciler struct {
	// Client reads and patches profiles.
	Client client.Client
	// Events records events whose reasons equal condition reasons. Optional.
	Events events.EventRecorder
	// Audit receives one record per verification decision (an event). Optional.
	Audit *audit.Logger
	// Resolver verifies sources under the cluster policy.
	Resolver *activation.Resolver
	// Clock is injected for tests; nil means the real clock.
	Clock clock.PassiveClock
	// RefusedRetryInterval re-verifies a refused OCI source (a missing key Secret or signature
	// may appear); zero means 5 minutes. Successful verifications are cached and not repeated.
	RefusedRetryInterval time.Duration
	// RetryInterval is the first step of the exponential, jittered retry of a transient failure
	// (see retryBackoff; capped at defaultRetryMaxInterval).
	RetryInterval time.Duration
	// WaitGracePeriod is how long a waiting refusal (no trust source names the signer yet, a
	// key or pull Secret not yet present: activation.StageError.Waiting) reads Reconciling
	// before it reads Stalled; zero means defaultWaitGracePeriod.
	WaitGracePeriod time.Duration
	// Metrics is optional.
	Metrics *Metrics
	// Shard selects the profiles this manager verifies (--watch-label-selector); nil means all.
	Shard labels.Selector
	// MaxConcurrentReconciles bounds parallel profile passes (pack pulls and status writes wait
	// on the network); zero means 1.
	MaxConcurrentReconciles int

	// retries counts consecutive transient failures per profile.
	retries retryCounter
}

// +kubebuilder:rbac:groups=connectors.b10x.io,resources=mcpserviceprofiles,verbs=get;list;watch
// +kubebuilder:rbac:groups=connectors.b10x.io,resources=mcpserviceprofiles/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the reconciler.
func (r *ProfileReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1.McpServiceProfile{}, builder.WithPredicates(shardPredicate(r.Shard),
			predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}))).
		Named("mcpserviceprofile").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.MaxConcurrentReconciles, 1)}).
		Watches(&v1.McpTrustPolicy{}, r.trustPolicyEvents(),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})). // not on its own status writes
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.packProfilesIn),
			builder.WithPredicates(predicate.LabelChangedPredicate{})).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.bySecret)).
		Complete(r)
}

// bySecret enqueues the pack-sourced profiles of the Secret's namespace that name it as their
// pull secret or their own verify policy's public key (the manager sees only opted-in Secrets,
// so this fires on creation, labelling, rotation and unlabelling).
func (r *ProfileReconciler) bySecret(ctx context.Context, o client.Object) []reconcile.Request {
	list := &v1.McpServiceProfileList{}
	if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
		log.FromContext(ctx).Error(err, "Unable to list profiles for a Secret change")
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if oci := list.Items[i].Spec.Source.OCI; oci != nil && namesSecret(oci, o.GetName()) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return out
}

// namesSecret reports whether an OCI source reads Secret name (pull secret or public key).
func namesSecret(oci *v1.OCISource, name string) bool {
	if oci.PullSecretRef != nil && oci.PullSecretRef.Name == name {
		return true
	}
	return oci.Verify != nil && oci.Verify.PublicKey != nil && oci.Verify.PublicKey.Name == name
}

// trustPolicyEvents enqueues the pack-sourced profiles of the namespaces that a created,
// changed or deleted McpTrustPolicy selects, before or after the change: exactly the profiles
// whose trust it may change.
func (r *ProfileReconciler) trustPolicyEvents() handler.EventHandler {
	enqueue := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], policies ...client.Object) {
		for _, req := range r.profilesSelectedBy(ctx, policies...) {
			q.Add(req)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, e.Object)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, e.ObjectOld, e.ObjectNew)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, e.Object)
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, e.Object)
		},
	}
}

// profilesSelectedBy returns the pack-sourced profiles of the namespaces any of policies
// selects. A policy that selects every namespace, or whose selector does not parse (the
// verifier then ignores it, but its previous version may have granted), brings all of them.
func (r *ProfileReconciler) profilesSelectedBy(ctx context.Context, policies ...client.Object) []reconcile.Request {
	var sels []labels.Selector
	for _, o := range policies {
		p, ok := o.(*v1.McpTrustPolicy)
		if !ok {
			return r.packProfilesMatching(ctx)
		}
		sel, err := metav1.LabelSelectorAsSelector(&p.Spec.NamespaceSelector)
		if err != nil || sel.Empty() {
			return r.packProfilesMatching(ctx)
		}
		sels = append(sels, sel)
	}
	namespaces := &corev1.NamespaceList{}
	if err := r.Client.List(ctx, namespaces); err != nil {
		log.FromContext(ctx).Error(err, "Unable to list namespaces for a trust change")
		return r.packProfilesMatching(ctx)
	}
	var out []reconcile.Request
	for i := range namespaces.Items {
		ns := &namespaces.Items[i]
		for _, sel := range sels {
			if sel.Matches(labels.Set(ns.Labels)) {
				out = append(out, r.packProfilesMatching(ctx, client.InNamespace(ns.Name))...)
				break
			}
		}
	}
	return out
}

// packProfilesIn enqueues the pack-sourced profiles of a namespace whose labels changed (an
// McpTrustPolicy's namespaceSelector may select it now, or no longer).
func (r *ProfileReconciler) packProfilesIn(ctx context.Context, o client.Object) []reconcile.Request {
	return r.packProfilesMatching(ctx, client.InNamespace(o.GetName()))
}

func (r *ProfileReconciler) packProfilesMatching(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
	list := &v1.McpServiceProfileList{}
	if err := r.Client.List(ctx, list, opts...); err != nil {
		log.FromContext(ctx).Error(err, "Unable to list profiles for a trust change")
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if p := &list.Items[i]; p.Spec.Source.OCI != nil {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(p)})
		}
	}
	return out
}

// Reconcile runs one verification pass and writes status once, only when it changed.
func (r *ProfileReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	p := &v1.McpServiceProfile{}
	if err := r.Client.Get(ctx, req.NamespacedName, p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !inShard(r.Shard, p) {
		return ctrl.Result{}, nil // another shard's manager verifies it
	}
	if !p.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	orig := p.DeepCopy()
	now := r.now()

	ctx, span := tracing.Tracer().Start(ctx, "reconcile McpServiceProfile", trace.WithAttributes(
		tracing.KeyKind.String("McpServiceProfile"), tracing.KeyNamespace.String(p.Namespace), tracing.KeyName.String(p.Name),
		tracing.KeyGeneration.Int64(p.Generation)))
	resolved, failed := r.Resolver.Resolve(ctx, p)
	defer func() { endStage(span, failed) }() // the pass's span also covers its status write
	o := outcome{stages: profileConditions, failed: failed, readyReason: v1.ReasonVerified}
	o.waiting(orig.Status.Conditions, p.Generation, now, r.WaitGracePeriod)
	st := &p.Status
	if failed == nil {
		st.PackDigest = resolved.PackDigest
		st.ProfileDigest = resolved.ProfileDigest
		st.SnapshotDigest = resolved.Snapshot.Digest
		st.Verified = resolved.Provenance
		o.readyMessage = fmt.Sprintf("verified profile %s with snapshot %s", resolved.ProfileDigest, resolved.Snapshot.Digest)
		if pv := resolved.Provenance; pv != nil && len(pv.WaivedChecks) > 0 {
			o.readyMessage += fmt.Sprintf("; checks waived by unsafe manager flags: %s", strings.Join(pv.WaivedChecks, ", "))
		}
	} else if !failed.Transient() {
		// A refused source proves nothing: keep no digest that could pass for verified.
		st.PackDigest, st.ProfileDigest, st.SnapshotDigest, st.Verified = "", "", "", nil
	}
	applyConditions(&st.Conditions, p.Generation, now, o)
	// The reconstruction stage was written as SnapshotMatched before it was renamed
	// (SnapshotReconstructed): a profile written by an older manager must not keep both. Nothing
	// reads a profile's SnapshotMatched back, so the old condition is simply dropped.
	meta.RemoveStatusCondition(&st.Conditions, v1.ConditionSnapshotMatched)
	if o.terminal() {
		st.ObservedGeneration = p.Generation
	}

	w, err := patchStatus(ctx, r.Client, p, orig, true)
	if err != nil {
		return ctrl.Result{}, err
	}
	if res, stop := w.stopsPass(); stop {
		return res, nil
	}
	if w == statusWritten {
		r.announce(ctx, p, readyReason(orig.Status.Conditions), o, now)
	}

	name := client.ObjectKeyFromObject(p)
	if !o.reconciling() {
		r.retries.reset(name)
	}
	switch {
	case o.reconciling():
		// Exponential, jittered per profile (retryBackoff): a registry outage is not retried by
		// every profile at once, every RetryInterval. A waiting refusal is also re-verified at
		// once when a trust policy, a namespace's labels or a Secret it names changes.
		n := r.retries.next(name)
		return ctrl.Result{RequeueAfter: o.retryAfter(retryBackoff(r.retryInterval(), defaultRetryMaxInterval, n, retryJitter(p.UID, n)))}, nil
	case failed != nil && p.Spec.Source.OCI != nil:
		if r.RefusedRetryInterval > 0 {
			return ctrl.Result{RequeueAfter: r.RefusedRetryInterval}, nil
		}
		return ctrl.Result{RequeueAfter: 5 * time.Minute}, nil
	}
	return ctrl.Result{}, nil
}

// announce emits an event and counts a refusal when the Ready reason changed.
func (r *ProfileReconciler) announce(ctx context.Context, p *v1.McpServiceProfile, prevReason string, o outcome, start time.Time) {
	reason, msg, typ := o.readyReason, o.readyMessage, corev1.EventTypeNormal
	if o.failed != nil {
		reason, msg, typ = o.failed.Reason(), o.failed.Message(), corev1.EventTypeWarning
	}
	if reason == prevReason {
		return
	}
	log.FromContext(ctx).Info("Profile state changed", "reason", reason)
	if err := r.Audit.Write(decision(ctx, "McpServiceProfile", p.Namespace, p.Name, p.Generation, reason, o, start, r.now(),
		p.Status.SnapshotDigest, p.Status.ProfileDigest, "")); err != nil {
		log.FromContext(ctx).Error(err, "Writing the audit record failed")
	}
	if r.Events != nil {
		r.Events.Eventf(p, nil, typ, reason, "Verify", "%s", msg)
	}
	if r.Metrics != nil && o.failed != nil {
		r.Metrics.Refusals.WithLabelValues("McpServiceProfile", reason).Inc()
	}
}

func (r *ProfileReconciler) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

func (r *ProfileReconciler) retryInterval() time.Duration {
	if r.RetryInterval <= 0 {
		return 30 * time.Second
	}
	return r.RetryInterval
}
