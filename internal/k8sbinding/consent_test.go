package k8sbinding

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/b10x/connector-mcp/egress"
)

// TestSecretStoreConsent: a read the apiserver forbids (the namespace did not bind the
// credentials ClusterRole to the reader) is the named, transient refusal
// credential_consent_missing, the same for an existing and an absent Secret, and carries nothing
// of the apiserver's text; the consenting namespace's opted-in Secret is spent.
func TestSecretStoreConsent(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	consenting := secret(corev1.SecretTypeOpaque, true, "mcp.example.com")
	other := secret(corev1.SecretTypeOpaque, true, "mcp.example.com")
	other.Namespace = "team-b"
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(consenting, other).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if key.Namespace == "team-b" {
				return apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, key.Name, errors.New(`User "gw" cannot get resource "secrets"`))
			}
			return c.Get(ctx, key, obj, opts...)
		}}).Build()
	ref := egress.CredentialRef{Name: "tok", Key: "token"}
	v, err := NewSecretStore(c, "team-a", endpoint).Get(context.Background(), ref)
	if err != nil || string(v) != "s3cret-value" {
		t.Fatalf("consenting namespace: %q %v", v, err)
	}
	for _, name := range []string{"tok", "absent"} {
		_, err := NewSecretStore(c, "team-b", endpoint).Get(context.Background(), egress.CredentialRef{Name: name, Key: "token"})
		var refused *CredentialRefusal
		if !errors.As(err, &refused) || refused.Name != RefusalCredentialConsentMissing || !refused.Transient() {
			t.Fatalf("Secret %q without consent: %v, want transient %s", name, err, RefusalCredentialConsentMissing)
		}
		if strings.Contains(err.Error(), "cannot get") || strings.Contains(err.Error(), "s3cret") {
			t.Fatalf("the refusal carries the apiserver's text or the value: %v", err)
		}
	}
	// The twin: an absent Secret in the consenting namespace stays credential_not_opted_in.
	_, err = NewSecretStore(c, "team-a", endpoint).Get(context.Background(), egress.CredentialRef{Name: "absent", Key: "token"})
	var refused *CredentialRefusal
	if !errors.As(err, &refused) || refused.Name != RefusalCredentialNotOptedIn {
		t.Fatalf("absent Secret with consent: %v", err)
	}
}
