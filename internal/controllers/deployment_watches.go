package controllers

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	v1 "github.com/b10x/connector-mcp/api/v1"
)

// Index keys registered by SetupWithManager.
const (
	indexProfileRef = "spec.profileRef.name"
	indexGrantRef   = "spec.operations.grantRefs"
)

// +kubebuilder:rbac:groups=connectors.b10x.io,resources=servicedeployments,verbs=get;list;watch
// +kubebuilder:rbac:groups=connectors.b10x.io,resources=servicedeployments/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings;roles;clusterroles,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=services,verbs=get
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=list
// +kubebuilder:rbac:groups=networking.k8s.io,resources=servicecidrs,verbs=list
// +kubebuilder:rbac:groups=connectors.b10x.io,resources=mcptrustpolicies,verbs=get;list;watch

// SetupWithManager registers the reconciler, its indexes and its watches: deployments,
// the profiles they reference, the RoleBindings their grants name and the roles those bind, the other
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
		Watches(&rbacv1.Role{}, handler.EnqueueRequestsFromMapFunc(r.byRole)).
		Watches(&rbacv1.ClusterRole{}, handler.EnqueueRequestsFromMapFunc(r.byRole)).
		WatchesRawSource(source.Kind(mgr.GetCache(), &v1.ServiceDeployment{}, r.claimWatch())).
		WatchesRawSource(source.Channel(r.claimEvents, &handler.TypedEnqueueRequestForObject[*v1.ServiceDeployment]{})).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.byCredential)).
		Watches(&v1.McpReverifyRequest{}, handler.EnqueueRequestsFromMapFunc(r.byReverifyRequest)).
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

// byRole enqueues the deployments whose grants name a RoleBinding of the Role (in its
// namespace) or ClusterRole (in any namespace): a role created, changed or deleted may make a
// grant exist, allow or deny.
func (r *DeploymentReconciler) byRole(ctx context.Context, o client.Object) []reconcile.Request {
	kind := "Role"
	var opts []client.ListOption
	if _, ok := o.(*rbacv1.ClusterRole); ok {
		kind = "ClusterRole"
	} else {
		opts = append(opts, client.InNamespace(o.GetNamespace()))
	}
	var bindings rbacv1.RoleBindingList
	if err := r.Client.List(ctx, &bindings, opts...); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range bindings.Items {
		if rb := &bindings.Items[i]; rb.RoleRef.Kind == kind && rb.RoleRef.Name == o.GetName() {
			out = append(out, r.byGrant(ctx, rb)...)
		}
	}
	return out
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

func requests(items []v1.ServiceDeployment) []reconcile.Request {
	out := make([]reconcile.Request, len(items))
	for i := range items {
		out[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&items[i])}
	}
	return out
}
