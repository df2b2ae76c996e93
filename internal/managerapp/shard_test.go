package managerapp

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	v1 "github.com/b10x/connector-mcp/api/v1"
)

// --watch-label-selector selects the shard's objects; an empty one selects all; one that does
// not parse is refused by Validate with ErrWatchLabelSelector.
func TestWatchLabelSelector(t *testing.T) {
	o := DefaultOptions()
	if sel, err := o.ShardSelector(); err != nil || sel != nil {
		t.Fatalf("empty selector = %v, %v; want nil (all objects)", sel, err)
	}
	o.WatchLabelSelector = "sharding.connectors.b10x.io/key in (shard1)"
	sel, err := o.ShardSelector()
	if err != nil || o.Validate() != nil {
		t.Fatalf("valid selector refused: %v", err)
	}
	if !sel.Matches(labels.Set{"sharding.connectors.b10x.io/key": "shard1"}) || sel.Matches(labels.Set{"sharding.connectors.b10x.io/key": "shard2"}) || sel.Matches(labels.Set{}) {
		t.Fatal("the selector does not select exactly shard1")
	}
	o.WatchLabelSelector = "sharding.connectors.b10x.io/key in (shard1"
	if err := o.Validate(); !errors.Is(err, ErrWatchLabelSelector) {
		t.Fatalf("Validate = %v, want ErrWatchLabelSelector", err)
	}
}

// Each shard elects its own leader; the unsharded manager keeps the historical lease name.
func TestLeaderElectionIDPerShard(t *testing.T) {
	base := LeaderElectionID("")
	if base != "connector-mcp.connectors.b10x.io" {
		t.Fatalf("unsharded lease = %q", base)
	}
	a, b := LeaderElectionID("k in (shard1)"), LeaderElectionID("k in (shard2)")
	if a == b || a == base || a != LeaderElectionID("k in (shard1)") || len(a) > 63 {
		t.Fatalf("shard leases %q and %q are not distinct, stable DNS labels", a, b)
	}
}

// The cache strips managedFields from every object it holds (and keeps what is read).
func TestCacheOptionsStripManagedFields(t *testing.T) {
	co := CacheOptions()
	if co.DefaultTransform == nil {
		t.Fatal("no default transform")
	}
	secretSelected := false
	for obj, bo := range co.ByObject {
		if _, ok := obj.(*corev1.Secret); ok && bo.Label != nil && !bo.Label.Empty() {
			secretSelected = true
		}
	}
	if !secretSelected {
		t.Fatal("the Secret informer is not label-filtered")
	}
	sd := &v1.ServiceDeployment{ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: map[string]string{"a": "b"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}},
		Spec: v1.ServiceDeploymentSpec{ProviderID: "p"}}
	out, err := co.DefaultTransform(sd)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*v1.ServiceDeployment)
	if len(got.ManagedFields) != 0 || got.Spec.ProviderID != "p" || got.Labels["a"] != "b" {
		t.Fatalf("transformed object = %+v", got.ObjectMeta)
	}
}

// The cached Secrets lose managedFields and kubectl's plaintext last-applied copy but keep what
// the credential check reads (labels, the allowed-hosts annotation, data); cached RoleBindings
// lose their subjects but keep roleRef. Other types only lose managedFields.
func TestLeanCacheTransforms(t *testing.T) {
	var secretT, rbT func(any) (any, error)
	for obj, bo := range CacheOptions().ByObject {
		switch obj.(type) {
		case *corev1.Secret:
			secretT = bo.Transform
		case *rbacv1.RoleBinding:
			rbT = bo.Transform
		}
	}
	if secretT == nil || rbT == nil {
		t.Fatal("no Secret or RoleBinding transform")
	}
	mf := []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tok", ManagedFields: mf, Labels: map[string]string{v1.CredentialLabel: "true"},
		Annotations: map[string]string{v1.CredentialAllowedHostsAnnotation: "mcp.example.com", lastAppliedAnnotation: `{"data":{"token":"czNjcmV0"}}`}},
		Data: map[string][]byte{"token": []byte("s3cret")}}
	out, err := secretT(sec)
	if err != nil {
		t.Fatal(err)
	}
	s := out.(*corev1.Secret)
	if len(s.ManagedFields) != 0 || s.Annotations[lastAppliedAnnotation] != "" {
		t.Fatalf("cached Secret keeps %v / %v", s.ManagedFields, s.Annotations)
	}
	if s.Annotations[v1.CredentialAllowedHostsAnnotation] != "mcp.example.com" || s.Labels[v1.CredentialLabel] != "true" || string(s.Data["token"]) != "s3cret" {
		t.Fatalf("cached Secret lost what the credential check reads: %+v", s)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "grant", ManagedFields: mf},
		RoleRef:  rbacv1.RoleRef{Kind: "Role", Name: "invoker"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "agent"}}}
	out, err = rbT(rb)
	if err != nil {
		t.Fatal(err)
	}
	if r := out.(*rbacv1.RoleBinding); len(r.Subjects) != 0 || len(r.ManagedFields) != 0 || r.RoleRef.Name != "invoker" {
		t.Fatalf("cached RoleBinding = %+v", r)
	}
}
