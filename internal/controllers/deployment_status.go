package controllers

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/b10x/connector-mcp/internal/audit"
	"github.com/b10x/connector-mcp/refusal"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/b10x/connector-mcp/api/v1"
)

// announce emits an event, logs and counts when the Ready reason changed or drift was found.
func (r *DeploymentReconciler) announce(ctx context.Context, sd, orig *v1.ServiceDeployment, o outcome, p *pass) {
	reason, msg, typ := o.readyReason, o.readyMessage, corev1.EventTypeNormal
	if o.failed != nil {
		reason, msg, typ = o.failed.Reason(), o.failed.Message(), corev1.EventTypeWarning
	}
	newDrift := p.drift != nil && sd.Status.CandidateSnapshotDigest != orig.Status.CandidateSnapshotDigest
	if reason == readyReason(orig.Status.Conditions) && !newDrift {
		return
	}
	log.FromContext(ctx).Info("Deployment state changed", "reason", reason, "activeSnapshot", sd.Status.ActiveSnapshotDigest, "candidateSnapshot", sd.Status.CandidateSnapshotDigest)
	if err := r.Audit.Write(decision(ctx, "ServiceDeployment", sd.Namespace, sd.Name, sd.Generation, reason, o, p.now, r.now(),
		sd.Status.ActiveSnapshotDigest, sd.Status.ProfileDigest, sd.Status.CandidateSnapshotDigest)); err != nil {
		log.FromContext(ctx).Error(err, "Writing the audit record failed")
	}
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
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1.ConditionReady, Status: metav1.ConditionFalse,
		Reason: v1.ReasonSuspended, Message: msg, ObservedGeneration: sd.Generation, LastTransitionTime: metav1.NewTime(r.now())})
	meta.RemoveStatusCondition(&st.Conditions, v1.ConditionReconciling)
	meta.RemoveStatusCondition(&st.Conditions, v1.ConditionStalled)
	if w, err := patchStatus(ctx, r.Client, sd, orig, false); err != nil || w != statusWritten {
		return err
	}
	if readyReason(orig.Status.Conditions) != v1.ReasonSuspended {
		log.FromContext(ctx).Info("Deployment suspended")
		if r.Events != nil {
			r.Events.Eventf(sd, nil, corev1.EventTypeNormal, v1.ReasonSuspended, "Suspend", "%s", msg)
		}
	}
	return nil
}

// decision is the audit record of an activation decision on an object: its new Ready reason and,
// for a refusal, the refusal name; the digests in force; the pass's duration; the trace of the
// pass when it was traced. Nothing of a stage's message is recorded.
func decision(ctx context.Context, kind, ns, name string, gen int64, reason string, o outcome, start, end time.Time,
	snapshot, profile, candidate string) audit.Record {
	r := audit.Record{Kind: audit.KindActivation, Object: kind, Namespace: ns, Name: name, Generation: gen, Outcome: reason,
		SnapshotDigest: snapshot, ProfileDigest: profile, CandidateDigest: candidate, DurationSeconds: audit.Seconds(end.Sub(start))}
	if o.failed != nil {
		r.Refusal = refusal.Name(o.failed)
	}
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		r.TraceID = sc.TraceID().String()
	}
	return r
}
