package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
	"github.com/b10x/connector-mcp/internal/oauthtest"
	"github.com/b10x/connector-mcp/mcpclient/oauth"
)

// staleCache is a cache that has not yet seen the last write of one Secret: Get of it returns the
// version before, as an informer does until the watch event arrives.
type staleCache struct {
	client.Client
	key    types.NamespacedName
	before *corev1.Secret
}

func (c staleCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if sec, ok := obj.(*corev1.Secret); ok && key == c.key {
		c.before.DeepCopyInto(sec)
		return nil
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// The producer redeems the refresh token the API server holds, not the cache's: right after a
// pass persisted a rotated token the cache may still hold the spent one, and redeeming that
// answers invalid_grant, so a human would have to log in again for nothing. Twin: read through
// the stale cache, the same pass ends in ReauthorizationRequired.
func TestCredentialRedeemsTheStoredRefreshTokenNotTheCachedOne(t *testing.T) {
	for _, c := range []struct {
		name     string
		uncached bool
		// serviceAccountToken stores the refresh token in a Secret of type
		// kubernetes.io/service-account-token without the opt-in label.
		serviceAccountToken bool
		reason              string
		message             string
	}{
		{name: "uncached read", uncached: true, reason: v1.ReasonTokenFresh},
		{name: "stale cache read (twin)", reason: v1.ReasonReauthorizationRequired},
		// The uncached read selects the opt-in label: a Secret without it is never read (a read
		// would refuse it as service_account_token and so tell that it exists).
		{name: "uncached read of a Secret not opted in", uncached: true, serviceAccountToken: true,
			reason: v1.ReasonSecretRefused, message: k8sbinding.RefusalCredentialNotOptedIn},
	} {
		t.Run(c.name, func(t *testing.T) {
			const secret = "client-s3cret"
			as := oauthtest.NewAuthServer(t, oauthtest.Config{Preregistered: map[string]string{"connector-mcp": secret}})
			rs := oauthtest.NewResourceServer(t, as)
			hc, err := egress.NewHTTPClient(egress.Policy{IP: egress.IPPolicy{Loopback: egress.LoopbackAllowedUnsafe}, MaxResponseBytes: oauth.MaxResponseBytes})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			login := oauthtest.Login(t, hc, rs, "connector-mcp", secret, []string{oauthtest.BaseScope})
			// An earlier pass redeemed the login's refresh token and persisted the rotated one.
			b, err := oauth.DiscoverBinding(ctx, hc, rs.URL, as.Issuer)
			if err != nil {
				t.Fatal(err)
			}
			pc := oauth.ProducerClient{ID: "connector-mcp", Secret: secret}
			rotated, err := oauth.Refresh(ctx, hc, b, pc, login.RefreshToken, []string{oauthtest.BaseScope})
			if err != nil {
				t.Fatal(err)
			}
			cred := &v1.McpCredential{
				ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "gh", Generation: 1, UID: "uid-gh"},
				Spec: v1.McpCredentialSpec{
					Resource: rs.URL, Issuer: as.Issuer, Grant: v1.GrantAuthorizationCode, Scopes: []string{oauthtest.BaseScope},
					Client: v1.OAuthClientRegistration{Registration: v1.RegistrationPreregistered, ClientID: "connector-mcp",
						ClientSecretRef: &v1.SecretKeyReference{Name: "gh-oauth", Key: "client-secret"}},
					RefreshTokenSecretRef: &v1.SecretKeyReference{Name: "gh-oauth", Key: v1.RefreshTokenKey},
					TargetSecretName:      "gh",
				},
			}
			s := newMetricsScheme(t)
			if err := corev1.AddToScheme(s); err != nil {
				t.Fatal(err)
			}
			// As mcpctl login --to-secret writes it: bound to gh and controlled by it.
			oauthSecret := func(rt string) *corev1.Secret {
				sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "gh-oauth",
					Labels: map[string]string{v1.CredentialLabel: "true", v1.CredentialBindingLabel: "gh"}},
					Data: map[string][]byte{v1.RefreshTokenKey: []byte(rt), "client-secret": []byte(secret)}}
				if err := controllerutil.SetControllerReference(cred, sec, s); err != nil {
					t.Fatal(err)
				}
				return sec
			}
			stored := oauthSecret(rotated.RefreshToken)
			if c.serviceAccountToken {
				stored.Labels, stored.Type = nil, corev1.SecretTypeServiceAccountToken
			}
			api := fake.NewClientBuilder().WithScheme(s).WithObjects(cred, stored).
				WithIndex(&corev1.Secret{}, "metadata.name", func(o client.Object) []string { return []string{o.GetName()} }).
				WithStatusSubresource(&v1.McpCredential{}).Build()
			cache := staleCache{Client: api, key: types.NamespacedName{Namespace: "team-a", Name: "gh-oauth"}, before: oauthSecret(login.RefreshToken)}
			r := &CredentialReconciler{Client: cache, HTTPClient: hc, Issuers: StaticIssuers{as.Issuer}}
			if c.uncached {
				r.APIReader = api
			}
			if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "gh"}}); err != nil {
				t.Fatal(err)
			}
			var got v1.McpCredential
			if err := api.Get(ctx, types.NamespacedName{Namespace: "team-a", Name: "gh"}, &got); err != nil {
				t.Fatal(err)
			}
			if r := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionReady); r == nil || r.Reason != c.reason || !strings.Contains(r.Message, c.message) {
				t.Fatalf("Ready = %+v, want reason %s and %q", r, c.reason, c.message)
			}
			if c.reason == v1.ReasonTokenFresh {
				// The issuer rotated the refresh token: it was written back into the owned Secret.
				var sec corev1.Secret
				if err := api.Get(ctx, types.NamespacedName{Namespace: "team-a", Name: "gh-oauth"}, &sec); err != nil {
					t.Fatal(err)
				}
				if rt := string(sec.Data[v1.RefreshTokenKey]); rt == rotated.RefreshToken || rt == "" {
					t.Fatal("the rotated refresh token was not persisted")
				}
			}
		})
	}
}
