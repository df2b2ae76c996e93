package controllers

import (
	"context"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/b10x/connector-mcp/api/v1"
)

// The watches map events to exactly the deployments that must be re-checked.
func TestWatchMappings(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1.AddToScheme(scheme)
	sd := func(name, profile string, grants []string, readyReason string) *v1.ServiceDeployment {
		d := &v1.ServiceDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
			Spec: v1.ServiceDeploymentSpec{ProfileRef: v1.LocalObjectReference{Name: profile},
				Operations: []v1.OperationBinding{{OperationRef: "op", GrantRefs: grants}}}}
		if readyReason != "" {
			d.Status.Conditions = []metav1.Condition{{Type: v1.ConditionReady, Status: metav1.ConditionFalse, Reason: readyReason}}
		}
		return d
	}
	r := &DeploymentReconciler{}
	c := fake.NewClientBuilder().WithScheme(scheme).
		WithIndex(&v1.ServiceDeployment{}, indexProfileRef, func(o client.Object) []string { return profileRefIndex(o) }).
		WithIndex(&v1.ServiceDeployment{}, indexGrantRef, func(o client.Object) []string { return grantRefIndex(o) }).
		WithObjects(
			sd("a", "p1", []string{"g1"}, ""),
			sd("b", "p1", []string{"g2"}, v1.ReasonAuthorityCollision),
			sd("c", "p2", []string{"g1", "g2"}, v1.ReasonGrantDenied),
			sd("d", "p2", []string{"g3"}, v1.ReasonOperationCollision),
		).Build()
	r.Client = c
	ctx := context.Background()
	names := func(reqs []reconcile.Request) []string {
		var out []string
		for _, q := range reqs {
			out = append(out, q.Name)
		}
		slices.Sort(out)
		return out
	}
	check := func(what string, got []reconcile.Request, want ...string) {
		t.Helper()
		if g := names(got); !slices.Equal(g, want) {
			t.Errorf("%s enqueued %v, want %v", what, g, want)
		}
	}
	check("profile p1", r.byProfile(ctx, &v1.McpServiceProfile{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p1"}}), "a", "b")
	check("profile in another namespace", r.byProfile(ctx, &v1.McpServiceProfile{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "p1"}}))
	check("rolebinding g2", r.byGrant(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g2"}}), "b", "c")
	check("role in ns", r.inNamespace(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "any"}}), "a", "b", "c", "d")
	// Deployment events re-enqueue through the claim index: see TestClaimIndexRequeuesSharersOnly.
}
