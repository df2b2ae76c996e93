package oauthk8s

import (
	"context"
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/mcpclient/oauth"
)

// A grant without a refresh token is refused before anything is written (the client is never
// used: nil here). The twin, a grant with one, is written by the envtest producer story and
// cmd/mcpctl's login --to-secret test.
func TestApplyRefusesGrantWithoutRefreshToken(t *testing.T) {
	cred := &oauth.Credential{Key: oauth.Key{Resource: "https://mcp.example.com/mcp", Issuer: "https://auth.example.com"}, AccessToken: "at"}
	if err := Apply(context.Background(), nil, "ns", "name", cred, apiv1.RegistrationPreregistered, nil); !errors.Is(err, ErrNoRefreshToken) {
		t.Fatalf("got %v, want ErrNoRefreshToken", err)
	}
}

func newClient(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := apiv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	// The API server gives every created object a UID (the owner reference names it).
	n := 0
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.CreateOption) error {
			if o.GetUID() == "" {
				n++
				o.SetUID(types.UID(fmt.Sprintf("uid-%d", n)))
			}
			return c.Create(ctx, o, opts...)
		}}).Build()
}

// Apply writes the refresh-token Secret as the producer requires it: opted in, bound to the
// McpCredential by name, controlled by it (owner reference with its UID), no allowed-hosts. A
// second login updates both; a Secret of that name that is a bearer, bound to another name, or
// controlled by another object is never overwritten (ErrForeignObject).
func TestApplyWritesABoundOwnedRefreshTokenSecret(t *testing.T) {
	ctx := context.Background()
	cred := &oauth.Credential{Key: oauth.Key{Resource: "https://mcp.example.com/mcp", Issuer: "https://auth.example.com"},
		ClientID: "connector-mcp", RefreshToken: "rt-1", ClientSecret: "cs"}
	c := newClient(t)
	if err := Apply(ctx, c, "team-a", "gh", cred, apiv1.RegistrationPreregistered, nil); err != nil {
		t.Fatal(err)
	}
	var mc apiv1.McpCredential
	if err := c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "gh"}, &mc); err != nil {
		t.Fatal(err)
	}
	var sec corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "gh" + OAuthSecretSuffix}, &sec); err != nil {
		t.Fatal(err)
	}
	if sec.Labels[apiv1.CredentialLabel] != "true" || sec.Labels[apiv1.CredentialBindingLabel] != "gh" ||
		sec.Annotations[apiv1.CredentialAllowedHostsAnnotation] != "" || !metav1.IsControlledBy(&sec, &mc) || mc.UID == "" {
		t.Fatalf("Secret labels %v, annotations %v, owners %+v (McpCredential UID %q)", sec.Labels, sec.Annotations, sec.OwnerReferences, mc.UID)
	}
	cred.RefreshToken = "rt-2"
	if err := Apply(ctx, c, "team-a", "gh", cred, apiv1.RegistrationPreregistered, []string{"repo"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(&sec), &sec); err != nil || string(sec.Data[apiv1.RefreshTokenKey]) != "rt-2" || len(sec.OwnerReferences) != 1 {
		t.Fatalf("second login: %v %q %+v", err, sec.Data[apiv1.RefreshTokenKey], sec.OwnerReferences)
	}

	isTrue := true
	for name, existing := range map[string]*corev1.Secret{
		"a bearer": {ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "x-oauth",
			Labels: map[string]string{apiv1.CredentialBindingLabel: "x"}, Annotations: map[string]string{apiv1.CredentialAllowedHostsAnnotation: "api.example.com"}}},
		"bound to another name": {ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "x-oauth", Labels: map[string]string{apiv1.CredentialBindingLabel: "y"}}},
		"unlabelled":            {ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "x-oauth"}},
	} {
		t.Run(name, func(t *testing.T) {
			c := newClient(t, existing)
			if err := Apply(ctx, c, "team-a", "x", cred, apiv1.RegistrationPreregistered, nil); !errors.Is(err, ErrForeignObject) {
				t.Fatalf("got %v, want ErrForeignObject", err)
			}
			var mcs apiv1.McpCredentialList
			if err := c.List(ctx, &mcs); err != nil || len(mcs.Items) != 0 {
				t.Fatalf("an McpCredential was written: %v %d", err, len(mcs.Items))
			}
		})
	}
	t.Run("controlled by another object", func(t *testing.T) {
		mine := &apiv1.McpCredential{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "x", UID: "uid-x",
			Labels: map[string]string{"app.kubernetes.io/managed-by": managedBy}}}
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "x-oauth", Labels: map[string]string{apiv1.CredentialBindingLabel: "x"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "other", UID: "uid-other", Controller: &isTrue}}}}
		c := newClient(t, mine, sec)
		if err := Apply(ctx, c, "team-a", "x", cred, apiv1.RegistrationPreregistered, nil); !errors.Is(err, ErrForeignObject) {
			t.Fatalf("got %v, want ErrForeignObject", err)
		}
	})
	t.Run("an earlier login's unowned Secret is adopted", func(t *testing.T) {
		mine := &apiv1.McpCredential{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "x", UID: "uid-x",
			Labels: map[string]string{"app.kubernetes.io/managed-by": managedBy}}}
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "x-oauth",
			Labels: map[string]string{apiv1.CredentialLabel: "true", apiv1.CredentialBindingLabel: "x"}}}
		c := newClient(t, mine, sec)
		if err := Apply(ctx, c, "team-a", "x", cred, apiv1.RegistrationPreregistered, nil); err != nil {
			t.Fatal(err)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(sec), sec); err != nil || !metav1.IsControlledBy(sec, mine) {
			t.Fatalf("not adopted: %v %+v", err, sec.OwnerReferences)
		}
	})
}
