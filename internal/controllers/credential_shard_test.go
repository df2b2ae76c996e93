package controllers

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/b10x/connector-mcp/api/v1"
)

// Exactly one shard produces a credential: two producers would each spend one rotating refresh
// token. A credential outside the manager's shard is left alone (no status, no request); the twin
// in the shard is reconciled (its missing refresh-token Secret is reported in status).
func TestCredentialProducerKeepsToItsShard(t *testing.T) {
	s := newMetricsScheme(t)
	if err := corev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	cred := func(name, shard string) *v1.McpCredential {
		return &v1.McpCredential{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, Generation: 1, Labels: map[string]string{ShardLabel: shard}},
			Spec: v1.McpCredentialSpec{
				Resource: "https://mcp.example.com/mcp", Issuer: "https://auth.example.com",
				Grant: v1.GrantAuthorizationCode, Client: v1.OAuthClientRegistration{Registration: v1.RegistrationPreregistered, ClientID: "c"},
				RefreshTokenSecretRef: &v1.SecretKeyReference{Name: name + "-oauth", Key: v1.RefreshTokenKey},
				TargetSecretName:      name,
			},
		}
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(cred("mine", "shard1"), cred("theirs", "shard2")).
		WithStatusSubresource(&v1.McpCredential{}).Build()
	sel, err := labels.Parse(ShardLabel + " in (shard1)")
	if err != nil {
		t.Fatal(err)
	}
	r := &CredentialReconciler{Client: c, Shard: sel}
	for _, name := range []string{"mine", "theirs"} {
		if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: name}}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	var got v1.McpCredential
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: "team-a", Name: "theirs"}, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) != 0 {
		t.Fatalf("another shard's credential was reconciled: %+v", got.Status.Conditions)
	}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: "team-a", Name: "mine"}, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) == 0 {
		t.Fatal("the shard's own credential was not reconciled")
	}
}
