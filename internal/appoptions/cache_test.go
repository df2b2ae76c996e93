package appoptions

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/b10x/connector-mcp/api/v1"
)

// The cached Secrets lose managedFields and kubectl's plaintext last-applied copy but keep what
// the credential check reads (labels, the allowed-hosts annotation, data); cached RoleBindings
// lose their subjects but keep roleRef.
func TestLeanCacheTransforms(t *testing.T) {
	var secretT, rbT func(any) (any, error)
	for obj, bo := range CacheByObject() {
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
