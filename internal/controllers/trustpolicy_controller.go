package controllers

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	v1 "github.com/b10x/connector-mcp/api/v1"
)

// TrustPolicyReconciler writes the status of McpTrustPolicies: Ready True (Valid), or Ready
// False and Stalled True (InvalidGrant) naming the invalid field, with observedGeneration. A
// pass over an unchanged policy writes nothing.
type TrustPolicyReconciler struct {
	// Client reads policies and patches their status.
	Client client.Client
	// Validate returns nil for a valid grant, or an error whose message names the invalid field
	// and a refusal name and never a value (adapters.ValidateTrustPolicy).
	Validate func(*v1.McpTrustPolicy) error
}

// +kubebuilder:rbac:groups=connectors.b10x.io,resources=mcptrustpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=connectors.b10x.io,resources=mcptrustpolicies/status,verbs=get;update;patch

// Reconcile validates one policy and writes its conditions when they change.
func (r *TrustPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p := &v1.McpTrustPolicy{}
	if err := r.Client.Get(ctx, req.NamespacedName, p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	want := trustPolicyConditions(r.Validate(p))
	before := p.DeepCopy()
	setConditions(&p.Status.Conditions, want, p.Generation)
	p.Status.ObservedGeneration = p.Generation
	if w, err := patchStatus(ctx, r.Client, p, before, false); err != nil || w != statusWritten {
		return ctrl.Result{}, err
	}
	if len(want) > 1 {
		log.FromContext(ctx).Info("An McpTrustPolicy is invalid and grants nothing", "mcpTrustPolicy", p.Name, "reason", v1.ReasonInvalidGrant)
	}
	return ctrl.Result{}, nil
}

// trustPolicyConditions is the pure decision: Ready True (Valid) when invalid is nil, else
// Ready False and Stalled True (InvalidGrant) with invalid's message.
func trustPolicyConditions(invalid error) []metav1.Condition {
	if invalid == nil {
		return []metav1.Condition{{Type: v1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1.ReasonValidGrant,
			Message: "the grant is valid"}}
	}
	msg := "the grant is refused and grants nothing: " + invalid.Error()
	return []metav1.Condition{
		{Type: v1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1.ReasonInvalidGrant, Message: msg},
		{Type: v1.ConditionStalled, Status: metav1.ConditionTrue, Reason: v1.ReasonInvalidGrant, Message: msg},
	}
}

// SetupWithManager watches McpTrustPolicies (spec changes only: not its own status writes).
func (r *TrustPolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1.McpTrustPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named("mcptrustpolicy").
		Complete(r)
}
