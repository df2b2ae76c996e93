package controllers

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/b10x/connector-mcp/api/v1"
)

// The McpApprovalRequest path (docs/approval.md): the gateway creates requests and marks an
// approved one Used; approvers write the decision. The manager only keeps time: it marks a
// request past spec.expiresAt Expired, records one Event per state, and deletes requests that
// ended (Denied, Expired, Used) once ApprovalRetention has passed.

// +kubebuilder:rbac:groups=connectors.b10x.io,resources=mcpapprovalrequests,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=connectors.b10x.io,resources=mcpapprovalrequests/status,verbs=update

// DefaultApprovalRetention is how long an ended approval request is kept (for audit) before the
// manager deletes it.
const DefaultApprovalRetention = 24 * time.Hour

// Event reasons of approval requests: one per state.
const (
	// ReasonApprovalRequested: a call created the request.
	ReasonApprovalRequested = "ApprovalRequested"
	// ReasonApproved: an approver approved it.
	ReasonApproved = "Approved"
	// ReasonApprovalDenied: an approver denied it.
	ReasonApprovalDenied = "ApprovalDenied"
	// ReasonApprovalExpired: it expired before it was used.
	ReasonApprovalExpired = "ApprovalExpired"
	// ReasonApprovalUsed: the approved call ran.
	ReasonApprovalUsed = "ApprovalUsed"
)

// approvalReasons maps a state to its Event reason and whether the Event is a Warning.
var approvalReasons = map[v1.ApprovalState]struct {
	reason  string
	warning bool
}{
	v1.ApprovalPending:  {ReasonApprovalRequested, false},
	v1.ApprovalApproved: {ReasonApproved, false},
	v1.ApprovalDenied:   {ReasonApprovalDenied, true},
	v1.ApprovalExpired:  {ReasonApprovalExpired, true},
	v1.ApprovalUsed:     {ReasonApprovalUsed, false},
}

// ApprovalRequestReconciler keeps the time of McpApprovalRequests: expiry, one Event per state,
// and garbage collection of ended requests. It never decides or uses a request.
type ApprovalRequestReconciler struct {
	// Client reads (cached) and writes requests.
	Client client.Client
	// Events records the state Events (nil: none).
	Events events.EventRecorder
	// Retention is how long an ended request is kept (zero: DefaultApprovalRetention).
	Retention time.Duration
	// Clock is the time source (nil: the real clock).
	Clock clock.PassiveClock
}

// approvalEnd is when an ended request ended: its use, its decision, or its expiry.
func approvalEnd(rq *v1.McpApprovalRequest) time.Time {
	end := rq.Spec.ExpiresAt.Time
	if rq.Status.UsedTime != nil && rq.Status.UsedTime.Before(&rq.Spec.ExpiresAt) {
		end = rq.Status.UsedTime.Time
	}
	if d := rq.Status.Decision; rq.Status.State == v1.ApprovalDenied && d != nil && d.Time.Before(&rq.Spec.ExpiresAt) {
		end = d.Time.Time
	}
	return end
}

// Reconcile marks an expired request Expired, records the Event of its state once, and deletes an
// ended request past its retention.
func (r *ApprovalRequestReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	clk := r.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	retention := r.Retention
	if retention <= 0 {
		retention = DefaultApprovalRetention
	}
	rq := &v1.McpApprovalRequest{}
	if err := r.Client.Get(ctx, req.NamespacedName, rq); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	now := clk.Now()
	state := rq.Status.State
	if state == "" {
		state = v1.ApprovalPending
	}
	if eff := rq.EffectiveState(metav1.NewTime(now)); eff != state {
		// Pending or Approved past its expiry: Expired (an update under the resourceVersion read, so
		// a gateway's concurrent use of it wins or loses cleanly).
		next := rq.DeepCopy()
		next.Status.State = eff
		if err := r.Client.Status().Update(ctx, next); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		return ctrl.Result{}, nil // the update brings the next pass
	}
	if rq.Status.AnnouncedState != state {
		if r.Events != nil {
			rs := approvalReasons[state]
			kind := "Normal"
			if rs.warning {
				kind = "Warning"
			}
			by := ""
			if d := rq.Status.Decision; d != nil && (state == v1.ApprovalApproved || state == v1.ApprovalDenied) {
				by = " by " + d.Approver
			}
			r.Events.Eventf(rq, nil, kind, rs.reason, "Approval",
				"operation %s of deployment %s called by %s: %s%s", rq.Spec.Operation, rq.Spec.DeploymentName, rq.Spec.Caller.Username, state, by)
		}
		next := rq.DeepCopy()
		next.Status.State = state
		next.Status.AnnouncedState = state
		if err := r.Client.Status().Update(ctx, next); err != nil {
			if apierrors.IsConflict(err) {
				return ctrl.Result{RequeueAfter: time.Second}, nil
			}
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		return ctrl.Result{}, nil
	}
	switch state {
	case v1.ApprovalPending, v1.ApprovalApproved:
		return ctrl.Result{RequeueAfter: max(rq.Spec.ExpiresAt.Sub(now), time.Second)}, nil
	}
	if gc := approvalEnd(rq).Add(retention); now.Before(gc) {
		return ctrl.Result{RequeueAfter: gc.Sub(now)}, nil
	}
	return ctrl.Result{}, client.IgnoreNotFound(r.Client.Delete(ctx, rq, client.Preconditions{UID: &rq.UID, ResourceVersion: &rq.ResourceVersion}))
}

// SetupWithManager watches McpApprovalRequests.
func (r *ApprovalRequestReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1.McpApprovalRequest{}).
		Named("mcpapprovalrequest").
		Complete(r)
}
