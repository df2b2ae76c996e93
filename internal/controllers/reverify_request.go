package controllers

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/b10x/connector-mcp/api/v1"
)

// The McpReverifyRequest path: the gateway (which may only create them) asks for the
// re-verification of a deployment without patching it. The deployment reconciler treats an
// outstanding request as a due freeze (reverifyRequestsDue); the ReverifyRequestReconciler
// deletes the requests a freeze satisfied and those naming no deployment.

// +kubebuilder:rbac:groups=connectors.b10x.io,resources=mcpreverifyrequests,verbs=get;list;watch;delete

// reverifyRequestTime is when a request asks for a freeze: its creation time rounded up to the
// next whole second (metadata.creationTimestamp is stored truncated to the second, as is
// status.lastFrozenTime), so a freeze recorded at or after it surely followed the request.
func reverifyRequestTime(rq *v1.McpReverifyRequest) time.Time {
	return rq.CreationTimestamp.Add(time.Second)
}

// reverifySatisfied reports whether the deployment's last freeze answered rq.
func reverifySatisfied(rq *v1.McpReverifyRequest, sd *v1.ServiceDeployment) bool {
	last := sd.Status.LastFrozenTime
	return last != nil && !reverifyRequestTime(rq).After(last.Time)
}

// reverifyRequestsDue reads the outstanding McpReverifyRequests naming sd at now: due reports one
// the last freeze has not satisfied and whose rate limit has passed; wait > 0 is the time until
// the rate limit (v1.ReverifyRequestMinInterval after the last freeze) lets an outstanding one
// through. A read error is no request: the periodic re-verification and the next event still come.
func (r *DeploymentReconciler) reverifyRequestsDue(ctx context.Context, sd *v1.ServiceDeployment, now time.Time) (due bool, wait time.Duration) {
	var list v1.McpReverifyRequestList
	if err := r.Client.List(ctx, &list, client.InNamespace(sd.Namespace)); err != nil {
		return false, 0
	}
	outstanding := false
	for i := range list.Items {
		if list.Items[i].Spec.DeploymentName == sd.Name && !reverifySatisfied(&list.Items[i], sd) {
			outstanding = true
			break
		}
	}
	if !outstanding {
		return false, 0
	}
	if last := sd.Status.LastFrozenTime; last != nil {
		if next := last.Add(v1.ReverifyRequestMinInterval); now.Before(next) {
			return false, next.Sub(now)
		}
	}
	return true, 0
}

// byReverifyRequest enqueues the deployment an McpReverifyRequest names.
func (r *DeploymentReconciler) byReverifyRequest(_ context.Context, o client.Object) []reconcile.Request {
	rq, ok := o.(*v1.McpReverifyRequest)
	if !ok || rq.Spec.DeploymentName == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: rq.Namespace, Name: rq.Spec.DeploymentName}}}
}

// ReverifyRequestReconciler deletes McpReverifyRequests that are done with: those a freeze of
// their deployment satisfied (status.lastFrozenTime at or after the request) and those naming a
// deployment that does not exist. It never freezes anything itself.
type ReverifyRequestReconciler struct {
	// Client reads requests and deployments (cached) and deletes requests.
	Client client.Client
	// Shard selects the deployments whose requests this manager handles; nil means all.
	Shard labels.Selector
	// RetryInterval is when an outstanding request is looked at again if no event came (zero:
	// 30 s).
	RetryInterval time.Duration
}

// Reconcile deletes one request when it is satisfied or names no deployment.
func (r *ReverifyRequestReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	rq := &v1.McpReverifyRequest{}
	if err := r.Client.Get(ctx, req.NamespacedName, rq); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	sd := &v1.ServiceDeployment{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: rq.Namespace, Name: rq.Spec.DeploymentName}, sd)
	switch {
	case apierrors.IsNotFound(err):
		return ctrl.Result{}, r.delete(ctx, rq)
	case err != nil:
		return ctrl.Result{}, err
	case !inShard(r.Shard, sd):
		return ctrl.Result{}, nil // another shard's manager handles it
	case reverifySatisfied(rq, sd):
		return ctrl.Result{}, r.delete(ctx, rq)
	}
	retry := r.RetryInterval
	if retry <= 0 {
		retry = 30 * time.Second
	}
	return ctrl.Result{RequeueAfter: retry}, nil
}

func (r *ReverifyRequestReconciler) delete(ctx context.Context, rq *v1.McpReverifyRequest) error {
	return client.IgnoreNotFound(r.Client.Delete(ctx, rq, client.Preconditions{UID: &rq.UID}))
}

// byDeployment enqueues the requests naming a deployment (its status writes satisfy them).
func (r *ReverifyRequestReconciler) byDeployment(ctx context.Context, o client.Object) []reconcile.Request {
	var list v1.McpReverifyRequestList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if list.Items[i].Spec.DeploymentName == o.GetName() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return out
}

// SetupWithManager watches McpReverifyRequests and the deployments they name.
func (r *ReverifyRequestReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1.McpReverifyRequest{}).
		Named("mcpreverifyrequest").
		Watches(&v1.ServiceDeployment{}, handler.EnqueueRequestsFromMapFunc(r.byDeployment)).
		Complete(r)
}
