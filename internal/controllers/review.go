package controllers

import (
	"context"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/review"
	"github.com/b10x/connector-mcp/snapshot"
)

// +kubebuilder:rbac:groups=connectors.b10x.io,resources=mcpsnapshotreviews,verbs=create;get;list;watch;update;patch;delete

// DriftNotifier is told of every drift candidate recorded in an McpSnapshotReview (a new one, or
// a new candidate in an existing one), after the write. It must not block: *review.WebhookSink
// queues and drops when full.
type DriftNotifier interface {
	// Notify offers the notice; it returns at once.
	Notify(n review.DriftNotice)
}

// BuildReview returns the McpSnapshotReview spec and Recorded condition for a drift from reviewed
// to live frozen at now, and the class counts. A candidate whose descriptors and changes exceed
// v1.MaxReviewDescriptorBytes is recorded without them and the condition says
// CandidateTooLarge: nothing is cut silently.
func BuildReview(deployment string, reviewed, live *snapshot.ToolSnapshot, now metav1.Time) (v1.McpSnapshotReviewSpec, metav1.Condition, error) {
	rep, err := review.Compare(reviewed, live)
	if err != nil {
		return v1.McpSnapshotReviewSpec{}, metav1.Condition{}, err
	}
	spec := v1.McpSnapshotReviewSpec{
		DeploymentName:          deployment,
		ReviewedSnapshotDigest:  reviewed.Digest,
		CandidateSnapshotDigest: live.Digest,
		ReviewedProtocolVersion: reviewed.ProtocolVersion,
		ProtocolVersion:         live.ProtocolVersion,
		ServerInfo:              v1.ServerInfo{Name: live.ServerInfo.Name, Title: live.ServerInfo.Title, Version: live.ServerInfo.Version},
		FrozenAt:                now,
	}
	if len(rep.Counts) > 0 {
		spec.Classes = make(map[string]int32, len(rep.Counts))
		for c, n := range rep.Counts {
			spec.Classes[c] = int32(n) //nolint:gosec // G115: at most a few thousand tools
		}
	}
	size := 0
	for _, td := range rep.Tools {
		d := v1.ReviewToolDiff{Name: td.Name, Kind: td.Kind, From: td.From, To: td.To, Classes: td.Classes, Flags: td.Flags}
		for _, w := range td.Warnings {
			d.Warnings = append(d.Warnings, w.Code+" "+w.Path)
		}
		for _, c := range td.Changes {
			rc := v1.ReviewChange{Path: c.Path, Classes: c.Classes}
			if c.Old != nil {
				s := string(c.Old)
				rc.Old = &s
				size += len(s)
			}
			if c.New != nil {
				s := string(c.New)
				rc.New = &s
				size += len(s)
			}
			size += len(c.Path)
			d.Changes = append(d.Changes, rc)
		}
		spec.Diff = append(spec.Diff, d)
		switch td.Kind {
		case review.KindRemoved:
			spec.Removed = append(spec.Removed, td.Name)
		case review.KindAdded, review.KindChanged:
			t, _ := live.Lookup(td.Name)
			rt := v1.ReviewTool{Name: t.Name, Digest: t.Digest, Descriptor: &runtime.RawExtension{Raw: append(json.RawMessage(nil), t.Descriptor...)}}
			size += len(t.Descriptor)
			if td.Kind == review.KindAdded {
				spec.Added = append(spec.Added, rt)
			} else {
				spec.Changed = append(spec.Changed, rt)
			}
		}
	}
	cond := metav1.Condition{Type: v1.ReviewConditionRecorded, Status: metav1.ConditionTrue, Reason: v1.ReasonCandidateComplete,
		Message: "every descriptor and change of the candidate is recorded"}
	if size > v1.MaxReviewDescriptorBytes {
		for i := range spec.Added {
			spec.Added[i].Descriptor = nil
		}
		for i := range spec.Changed {
			spec.Changed[i].Descriptor = nil
		}
		for i := range spec.Diff {
			spec.Diff[i].Changes = nil
		}
		cond = metav1.Condition{Type: v1.ReviewConditionRecorded, Status: metav1.ConditionFalse, Reason: v1.ReasonCandidateTooLarge,
			Message: "the candidate's descriptors and changes exceed the 1 MiB review bound: names, digests and classes are recorded; snapshot the server with mcpctl to review it"}
	}
	return spec, cond, nil
}

// recordReview writes the McpSnapshotReview of a drift found in this pass (named after and owned
// by the deployment) and sets the class counts in status. An unchanged candidate writes nothing.
func (r *DeploymentReconciler) recordReview(ctx context.Context, p *pass) {
	sd := p.sd
	spec, cond, err := BuildReview(sd.Name, p.resolved.Snapshot, p.live, metav1.NewTime(p.now))
	if err != nil {
		log.FromContext(ctx).Error(err, "Cannot build the snapshot review")
		return
	}
	if sd.Status.Drift != nil {
		sd.Status.Drift.Classes = spec.Classes
	}
	cur := &v1.McpSnapshotReview{}
	key := types.NamespacedName{Namespace: sd.Namespace, Name: sd.Name}
	err = r.Client.Get(ctx, key, cur)
	switch {
	case err == nil:
		if cur.Spec.CandidateSnapshotDigest == spec.CandidateSnapshotDigest && cur.Spec.ReviewedSnapshotDigest == spec.ReviewedSnapshotDigest &&
			metav1.IsControlledBy(cur, sd) {
			return
		}
		if !metav1.IsControlledBy(cur, sd) && metav1.GetControllerOf(cur) != nil {
			log.FromContext(ctx).Info("Snapshot review owned by another object, not overwritten", "review", key.String())
			return
		}
		cur.Spec = spec
		cur.Status.Conditions = nil
		meta.SetStatusCondition(&cur.Status.Conditions, cond)
		if err := controllerutil.SetControllerReference(sd, cur, r.Client.Scheme()); err != nil {
			log.FromContext(ctx).Error(err, "Cannot own the snapshot review")
			return
		}
		if err := r.Client.Update(ctx, cur); err != nil {
			log.FromContext(ctx).Error(err, "Cannot update the snapshot review", "review", key.String())
			return
		}
	case apierrors.IsNotFound(err):
		rv := &v1.McpSnapshotReview{ObjectMeta: metav1.ObjectMeta{Namespace: sd.Namespace, Name: sd.Name}, Spec: spec}
		meta.SetStatusCondition(&rv.Status.Conditions, cond)
		if err := controllerutil.SetControllerReference(sd, rv, r.Client.Scheme()); err != nil {
			log.FromContext(ctx).Error(err, "Cannot own the snapshot review")
			return
		}
		if err := r.Client.Create(ctx, rv); err != nil {
			log.FromContext(ctx).Error(err, "Cannot create the snapshot review", "review", key.String())
			return
		}
	default:
		log.FromContext(ctx).Error(err, "Cannot read the snapshot review", "review", key.String())
		return
	}
	if r.Metrics != nil {
		for c := range spec.Classes {
			r.Metrics.DriftClasses.WithLabelValues(c).Inc()
		}
	}
	if r.DriftNotifier != nil {
		r.DriftNotifier.Notify(review.NoticeOf(sd.Namespace, &spec, cond.Reason))
	}
	log.FromContext(ctx).Info("Snapshot review recorded", "review", key.String(), "candidateSnapshot", spec.CandidateSnapshotDigest, "reason", cond.Reason)
	if cond.Status == metav1.ConditionFalse && r.Events != nil {
		r.Events.Eventf(sd, nil, corev1.EventTypeWarning, cond.Reason, "RecordReview", "%s", cond.Message)
	}
}

// dropReview deletes the deployment's McpSnapshotReview once a freeze matched the reviewed
// snapshot: there is nothing left to review. A missing review writes nothing.
func (r *DeploymentReconciler) dropReview(ctx context.Context, sd *v1.ServiceDeployment) {
	cur := &v1.McpSnapshotReview{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: sd.Namespace, Name: sd.Name}, cur); err != nil {
		return
	}
	if !metav1.IsControlledBy(cur, sd) {
		return
	}
	if err := r.Client.Delete(ctx, cur); err != nil && !apierrors.IsNotFound(err) {
		log.FromContext(ctx).Error(err, "Cannot delete the snapshot review", "review", sd.Namespace+"/"+sd.Name)
	}
}
