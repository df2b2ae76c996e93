package controllers

import (
	"context"
	"fmt"
	"time"

	"github.com/b10x/connector-mcp/internal/audit"

	"github.com/b10x/connector-mcp/internal/activation"

	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
	"github.com/b10x/connector-mcp/internal/tracing"
	"github.com/b10x/connector-mcp/refusal"
	"github.com/b10x/connector-mcp/snapshot"
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
	// HostFreezeLimit spaces periodic re-verification freezes per upstream host; nil: no limit.
	HostFreezeLimit *HostFreezeLimiter
	// Audit receives one record per activation decision (an event). Optional.
	Audit *audit.Logger
	// Resolver verifies the referenced profile's source (memoized).
	Resolver *activation.Resolver
	// Freezer lists the live tools through egress.
	Freezer activation.Freezer
	// Clock is injected for tests; nil means the real clock.
	Clock clock.PassiveClock
	// ReverifyInterval is the period of live re-verification (re-freeze); spread per object.
	ReverifyInterval time.Duration
	// ReverifyJitter spreads re-verification over the interval (nextVerification): the first
	// after a freeze comes at least this fraction of ReverifyInterval later and at most 1 + it
	// (e.g. 0.1); 0 means exactly every interval.
	ReverifyJitter float64
	// FreezeTimeout bounds one live freeze.
	FreezeTimeout time.Duration
	// RetryInterval is the first step of the exponential, jittered retry of a transient failure
	// (see retryBackoff); zero means 30 s.
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
	// defaultRetryMaxInterval). See retryBackoff.
	RetryMaxInterval time.Duration
	// WaitGracePeriod is how long a waiting refusal (a grant RoleBinding or its role not yet
	// present, a profile that waits: activation.StageError.Waiting) reads Reconciling before it
	// reads Stalled; zero means defaultWaitGracePeriod.
	WaitGracePeriod time.Duration

	// claims is the claim index of every deployment (see claims.go).
	claims claimIndex
	// claimEvents re-enqueues deployments whose judgement a derivation changed; nil without a
	// manager.
	claimEvents chan event.TypedGenericEvent[*v1.ServiceDeployment]
	// informerFed is true when the ServiceDeployment informer feeds the claim index.
	informerFed bool
	// retries counts consecutive transient failures per deployment (see retryBackoff).
	retries retryCounter
	// written remembers the last status written per deployment (stale-cache repeats).
	written writtenStatus
}

// deploymentStage is one stage of a ServiceDeployment pass: the activation table's condition
// (internal/activation) and the function that runs it.
type deploymentStage struct {
	condition string
	run       func(r *DeploymentReconciler, ctx context.Context, p *pass) *activation.StageError
}

// deploymentStages run in a pass in the activation table's order (activation.DeploymentConditions,
// TestDeploymentStagesFollowTheTable). Binding runs before the live freeze so that an unbound
// deployment (no grant, a collision, an endpoint beyond its namespace's egress ceiling) never
// dials its endpoint nor reads its credential.
var deploymentStages = []deploymentStage{
	{v1.ConditionProfileVerified, (*DeploymentReconciler).verifyProfile},
	{v1.ConditionBound, (*DeploymentReconciler).bind},
	{v1.ConditionSnapshotFrozen, (*DeploymentReconciler).freeze},
	{v1.ConditionSnapshotMatched, (*DeploymentReconciler).match},
}

// endStage ends a pass's or a stage's span with the stage's outcome: its condition reason and
// refusal name, never its message (which may quote what a server or registry wrote).
func endStage(span trace.Span, failed *activation.StageError) {
	if failed == nil {
		tracing.EndWithReason(span, "", "")
		return
	}
	tracing.EndWithReason(span, failed.Reason(), refusal.Name(failed))
}

// deploymentConditions are the stage conditions of a pass, in order.
var deploymentConditions = activation.DeploymentConditions()

// pass is the state of one reconcile pass.
type pass struct {
	sd       *v1.ServiceDeployment
	now      time.Time
	resolved *activation.Resolved
	credHash string
	live     *snapshot.ToolSnapshot
	drift    *snapshot.Diff
	froze    bool
	// reverify is the due re-verification request of the ReverifyRequestedAtAnnotation, if any.
	reverify bool
	// reverifyWait is how long until a request stamped slightly in the future becomes due.
	reverifyWait time.Duration
	// hostWait is how long until the freeze slot this periodic re-verification holds on its
	// upstream host (HostFreezeLimiter); it replaces the due re-verification's requeue.
	hostWait time.Duration
	// profileUnseen is true when the referenced profile exists in this manager's shard, was
	// created less than profileUnseenGrace ago and its reconciler has not written its status
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
	ctx, span := tracing.Tracer().Start(ctx, "reconcile ServiceDeployment", trace.WithAttributes(
		tracing.KeyKind.String("ServiceDeployment"), tracing.KeyNamespace.String(sd.Namespace), tracing.KeyName.String(sd.Name),
		tracing.KeyGeneration.Int64(sd.Generation)))
	p := &pass{sd: sd, now: r.now()}
	p.reverify, p.reverifyWait = reverifyRequested(sd, p.now)
	if !p.reverify {
		// An McpReverifyRequest (the gateway's way, which needs no patch on the deployment).
		due, wait := r.reverifyRequestsDue(ctx, sd, p.now)
		p.reverify = due
		if wait > 0 && (p.reverifyWait == 0 || wait < p.reverifyWait) {
			p.reverifyWait = wait
		}
	}

	var failed *activation.StageError
	defer func() { endStage(span, failed) }() // the pass's span also covers its status write
	for _, s := range deploymentStages {
		sctx, sspan := tracing.Tracer().Start(ctx, "stage "+s.condition, trace.WithAttributes(tracing.KeyStage.String(s.condition)))
		failed = s.run(r, sctx, p)
		endStage(sspan, failed)
		if failed != nil {
			break
		}
	}
	if failed == nil {
		span.SetAttributes(tracing.KeySnapshotDigest.String(p.resolved.Snapshot.Digest))
	}
	o := outcome{stages: deploymentConditions, failed: failed, readyReason: v1.ReasonActivated}
	o.waiting(orig.Status.Conditions, sd.Generation, p.now, r.WaitGracePeriod)
	st := &sd.Status
	if failed == nil {
		st.ActiveSnapshotDigest = p.resolved.Snapshot.Digest
		st.CandidateSnapshotDigest, st.Drift = "", nil
		st.ExposedOperations = exposed(sd)
		o.readyMessage = fmt.Sprintf("active snapshot %s; %d of %d operations exposed", st.ActiveSnapshotDigest, st.ExposedOperations, len(sd.Spec.Operations))
	} else {
		// Fail closed: nothing is active unless every stage passed in this pass.
		st.ActiveSnapshotDigest, st.ExposedOperations = "", 0
		if failed.Reason() != v1.ReasonSnapshotDrift {
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
		return r.result(sd, o), nil
	}
	if statusChanged(sd, orig) && r.written.staleRepeat(orig, sd) {
		// This very status was written by the previous pass and the cache has not caught up:
		// its watch event brings the next pass. No second write, no second event.
		return r.result(sd, o), nil
	}
	w, err := patchStatus(ctx, r.Client, sd, orig, true)
	if err != nil {
		return ctrl.Result{}, err
	}
	if res, stop := w.stopsPass(); stop {
		return res, nil
	}
	if w == statusWritten {
		r.written.record(sd)
		r.announce(ctx, sd, orig, o, p)
	}
	res := r.result(sd, o)
	if p.hostWait > 0 && !o.reconciling() {
		// The re-verification is due (its requeue would be the 1 s floor) but holds a later slot.
		res.RequeueAfter = p.hostWait
	}
	if w := p.reverifyWait; w > 0 && (res.RequeueAfter == 0 || w < res.RequeueAfter) {
		res.RequeueAfter = w
	}
	return res, nil
}

// profileUnseenGrace is how long after a profile's creation a new deployment referencing it
// waits, without writing a status, for the profile's first status (see waitsForProfile): long
// enough for a manager working through thousands of new profiles (with 5,000 created at once,
// 30 s was not). A profile outside this manager's shard is never waited for; the grace bounds
// only a profile reconciler that is stuck.
const profileUnseenGrace = 10 * time.Minute

// waitsForProfile reports a pass that should write nothing: the deployment has no status yet and
// failed only because its profile, which exists, has not been reconciled yet.
func waitsForProfile(orig *v1.ServiceDeployment, failed *activation.StageError, p *pass) bool {
	return failed != nil && failed.Reason() == v1.ReasonProfileNotReady && failed.Transient() && p.profileUnseen &&
		len(orig.Status.Conditions) == 0 && orig.Status.ObservedGeneration == 0
}

// result schedules the next pass: an exponential, jittered retry for transient failures, else the next jittered
// re-verification of the live server.
func (r *DeploymentReconciler) result(sd *v1.ServiceDeployment, o outcome) ctrl.Result {
	name := client.ObjectKeyFromObject(sd)
	if o.reconciling() {
		n := r.retries.next(name)
		maxDelay := r.RetryMaxInterval
		if maxDelay <= 0 {
			maxDelay = defaultRetryMaxInterval
		}
		return ctrl.Result{RequeueAfter: o.retryAfter(retryBackoff(r.retryInterval(), maxDelay, n, retryJitter(sd.UID, n)))}
	}
	r.retries.reset(name)
	if r.ReverifyInterval <= 0 || sd.Status.LastFrozenTime == nil {
		return ctrl.Result{}
	}
	next := nextVerification(sd.Status.LastFrozenTime.Time, r.ReverifyInterval, r.ReverifyJitter, string(sd.UID))
	d := next.Sub(r.now())
	if d < time.Second {
		d = time.Second
	}
	return ctrl.Result{RequeueAfter: d}
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
