package controllers

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
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
	binding := func(name, kind, role string) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role}}
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
			binding("g1", "Role", "invoker"), binding("g2", "ClusterRole", "invoker"), binding("g3", "Role", "other"),
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "elsewhere", Name: "g3"}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "invoker"}},
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
	// A role re-checks the deployments whose grants bind it, by kind, name and namespace.
	check("role invoker", r.byRole(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "invoker"}}), "a", "c")
	check("cluster role invoker", r.byRole(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "invoker"}}), "b", "c")
	check("role other", r.byRole(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "other"}}), "d")
	check("role invoker of another namespace", r.byRole(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "elsewhere", Name: "invoker"}}))
	// Deployment events re-enqueue through the claim index: see TestClaimIndexRequeuesSharersOnly.
}

// The profile watches map a trust policy to exactly the pack-sourced profiles of the namespaces
// it selects (before or after a change), and a Secret to the profiles of its namespace that name
// it as pull secret or public key.
func TestProfileWatchMappings(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1.AddToScheme(scheme)
	pack := func(ns, name, pull, key string) *v1.McpServiceProfile {
		p := &v1.McpServiceProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1.McpServiceProfileSpec{Source: v1.ProfileSource{OCI: &v1.OCISource{Ref: "r.example/p@sha256:" + strings.Repeat("a", 64)}}}}
		if pull != "" {
			p.Spec.Source.OCI.PullSecretRef = &v1.LocalObjectReference{Name: pull}
		}
		if key != "" {
			p.Spec.Source.OCI.Verify = &v1.VerifyPolicy{PublicKey: &v1.SecretKeyReference{Name: key, Key: "cosign.pub"}}
		}
		return p
	}
	namespace := func(name string, labels map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	inline := &v1.McpServiceProfile{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "inline"},
		Spec: v1.McpServiceProfileSpec{Source: v1.ProfileSource{Inline: &v1.ProfileDocument{}}}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		namespace("team-a", map[string]string{"team": "a"}), namespace("team-b", map[string]string{"team": "b"}), namespace("other", nil),
		pack("team-a", "a1", "regcred", ""), pack("team-a", "a2", "", "team-key"), inline,
		pack("team-b", "b1", "", "team-key"), pack("other", "o1", "", ""),
	).Build()
	r := &ProfileReconciler{Client: c}
	ctx := context.Background()
	keys := func(reqs []reconcile.Request) []string {
		var out []string
		for _, q := range reqs {
			out = append(out, q.Namespace+"/"+q.Name)
		}
		slices.Sort(out)
		return out
	}
	check := func(what string, got []reconcile.Request, want ...string) {
		t.Helper()
		if g := keys(got); !slices.Equal(g, want) {
			t.Errorf("%s enqueued %v, want %v", what, g, want)
		}
	}
	policy := func(sel metav1.LabelSelector) *v1.McpTrustPolicy {
		return &v1.McpTrustPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.McpTrustPolicySpec{NamespaceSelector: sel}}
	}
	selA := metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	selB := metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}}
	check("policy selecting team a", r.profilesSelectedBy(ctx, policy(selA)), "team-a/a1", "team-a/a2")
	check("policy moved from team a to b (old and new)", r.profilesSelectedBy(ctx, policy(selA), policy(selB)), "team-a/a1", "team-a/a2", "team-b/b1")
	check("policy selecting every namespace", r.profilesSelectedBy(ctx, policy(metav1.LabelSelector{})), "other/o1", "team-a/a1", "team-a/a2", "team-b/b1")
	bad := metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Bogus"}}}
	check("policy with an invalid selector", r.profilesSelectedBy(ctx, policy(bad)), "other/o1", "team-a/a1", "team-a/a2", "team-b/b1")
	check("policy selecting nothing present", r.profilesSelectedBy(ctx, policy(metav1.LabelSelector{MatchLabels: map[string]string{"team": "z"}})))

	secret := func(ns, name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	check("pull secret regcred", r.bySecret(ctx, secret("team-a", "regcred")), "team-a/a1")
	check("key Secret of team a", r.bySecret(ctx, secret("team-a", "team-key")), "team-a/a2")
	check("a Secret no profile names", r.bySecret(ctx, secret("team-a", "unrelated")))
}
