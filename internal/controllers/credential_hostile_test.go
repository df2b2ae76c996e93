package controllers

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
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
	"github.com/b10x/connector-mcp/mcpclient/oauth"
)

// countingServer is a tenant's own server on loopback: it answers nothing useful and counts
// every request it receives (an authorization server the tenant would read tokens at).
func countingServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n.Add(1)
		http.NotFound(w, nil)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func teamASecret(name string, labels map[string]string, data map[string][]byte) *corev1.Secret {
	l := map[string]string{v1.CredentialLabel: "true"}
	for k, v := range labels {
		l[k] = v
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, Labels: l}, Data: data}
}

func mcpCredential(name, uid, issuer, resource, refreshSecret string, clientSecret *v1.SecretKeyReference) *v1.McpCredential {
	return &v1.McpCredential{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1.GroupVersion.String(), Kind: "McpCredential"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, UID: types.UID(uid), Generation: 1},
		Spec: v1.McpCredentialSpec{
			Resource: resource, Issuer: issuer, Grant: v1.GrantAuthorizationCode,
			Client:                v1.OAuthClientRegistration{Registration: v1.RegistrationPreregistered, ClientID: "connector-mcp", ClientSecretRef: clientSecret},
			RefreshTokenSecretRef: &v1.SecretKeyReference{Name: refreshSecret, Key: v1.RefreshTokenKey},
			TargetSecretName:      name,
		},
	}
}

// A tenant with McpCredential write rights in team-a aims the hosted producer at its own
// authorization server (issuer and resource on a server it runs) and names a Secret of its
// namespace it cannot read: another credential's refresh token, a static bearer for another
// host, a ServiceAccount token, a Secret bound to nobody. Every pass ends in a named refusal and
// the tenant's server receives nothing: the issuer is outside the namespace's ceiling, and even
// with it inside, only Secrets bound to (and, to redeem a refresh token, owned by) the
// McpCredential are spent. The legitimate twin (bound, owned, allowed) is
// TestCredentialRedeemsTheStoredRefreshTokenNotTheCachedOne and the last case here.
func TestHostileTenantCannotAimTheProducer(t *testing.T) {
	tenant, received := countingServer(t)
	const legitIssuer = "https://auth.example.com"
	victim := mcpCredential("victim", "uid-victim", legitIssuer, "https://mcp.example.com/mcp", "victim-oauth", nil)
	s := newMetricsScheme(t)
	if err := corev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	owned := func(sec *corev1.Secret, owner *v1.McpCredential) *corev1.Secret {
		if err := controllerutil.SetControllerReference(owner, sec, s); err != nil {
			t.Fatal(err)
		}
		return sec
	}
	rt := map[string][]byte{v1.RefreshTokenKey: []byte("victim-refresh-token"), v1.ClientSecretKey: []byte("victim-client-secret")}
	victimRefresh := owned(teamASecret("victim-oauth", map[string]string{v1.CredentialBindingLabel: "victim"}, rt), victim)
	victimTarget := owned(teamASecret("victim", map[string]string{v1.CredentialProducerLabel: "victim"}, map[string][]byte{v1.CredentialTokenKey: []byte("victim-access-token")}), victim)
	victimTarget.Annotations = map[string]string{v1.CredentialAllowedHostsAnnotation: "mcp.example.com"}
	bearer := teamASecret("github-pat", nil, map[string][]byte{v1.RefreshTokenKey: []byte("static-bearer")})
	bearer.Annotations = map[string]string{v1.CredentialAllowedHostsAnnotation: "api.github.com"}
	saToken := teamASecret("sa-token", nil, map[string][]byte{v1.RefreshTokenKey: []byte("sa-jwt")})
	saToken.Type = corev1.SecretTypeServiceAccountToken
	unbound := teamASecret("unbound", nil, map[string][]byte{v1.RefreshTokenKey: []byte("unbound-value")})
	// Labelled for the attacker's McpCredential by someone, but not created through its login:
	// nothing owns it, so a rotated refresh token could not be written back.
	boundNotOwned := teamASecret("attacker-labelled", map[string]string{v1.CredentialBindingLabel: "attacker"}, map[string][]byte{v1.RefreshTokenKey: []byte("labelled-value")})

	for _, c := range []struct {
		name string
		// allowTenant puts the tenant's server inside the namespace's ceiling (as if an
		// administrator had allowed it), to show the Secret rules hold on their own.
		allowTenant   bool
		refresh       string
		clientSecret  *v1.SecretKeyReference
		resource      string
		reason, named string
	}{
		{name: "issuer outside the ceiling, another credential's refresh token", refresh: "victim-oauth",
			reason: v1.ReasonIssuerNotAllowed, named: RefusalOAuthIssuerNotAllowed},
		{name: "issuer outside the ceiling, a static bearer", refresh: "github-pat",
			reason: v1.ReasonIssuerNotAllowed, named: RefusalOAuthIssuerNotAllowed},
		{name: "another credential's refresh token", allowTenant: true, refresh: "victim-oauth",
			reason: v1.ReasonSecretRefused, named: RefusalOAuthSecretOfAnotherCredential},
		{name: "another credential's target Secret", allowTenant: true, refresh: "victim",
			reason: v1.ReasonSecretRefused, named: RefusalOAuthSecretIsBearer},
		{name: "a static bearer for another host", allowTenant: true, refresh: "github-pat",
			reason: v1.ReasonSecretRefused, named: RefusalOAuthSecretIsBearer},
		{name: "a ServiceAccount token", allowTenant: true, refresh: "sa-token",
			reason: v1.ReasonSecretRefused, named: k8sbinding.RefusalCredentialServiceAccountToken},
		{name: "an opted-in Secret bound to nobody", allowTenant: true, refresh: "unbound",
			reason: v1.ReasonSecretRefused, named: RefusalOAuthSecretNotBound},
		{name: "a bound refresh-token Secret the McpCredential does not own", allowTenant: true, refresh: "attacker-labelled",
			reason: v1.ReasonSecretRefused, named: RefusalOAuthRefreshSecretNotOwned},
		{name: "another credential's client secret", allowTenant: true, refresh: "attacker-oauth", clientSecret: &v1.SecretKeyReference{Name: "victim-oauth", Key: v1.ClientSecretKey},
			reason: v1.ReasonSecretRefused, named: RefusalOAuthSecretOfAnotherCredential},
		{name: "a resource over plain http to a non-loopback host", allowTenant: true, refresh: "attacker-oauth", resource: "http://mcp.example.com/mcp",
			reason: v1.ReasonResourceNotAllowed, named: RefusalOAuthResourceNotAllowed},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := received.Load()
			resource := tenant.URL + "/mcp"
			if c.resource != "" {
				resource = c.resource
			}
			attacker := mcpCredential("attacker", "uid-attacker", tenant.URL, resource, c.refresh, c.clientSecret)
			attackerRefresh := owned(teamASecret("attacker-oauth", map[string]string{v1.CredentialBindingLabel: "attacker"},
				map[string][]byte{v1.RefreshTokenKey: []byte("attacker-refresh-token")}), attacker)
			api := fake.NewClientBuilder().WithScheme(s).
				WithObjects(victim.DeepCopy(), attacker, victimRefresh.DeepCopy(), victimTarget.DeepCopy(), bearer.DeepCopy(), saToken.DeepCopy(),
					unbound.DeepCopy(), boundNotOwned.DeepCopy(), attackerRefresh).
				WithIndex(&corev1.Secret{}, "metadata.name", func(o client.Object) []string { return []string{o.GetName()} }).
				WithStatusSubresource(&v1.McpCredential{}).Build()
			hc, err := egress.NewHTTPClient(egress.Policy{IP: egress.IPPolicy{Loopback: egress.LoopbackAllowedUnsafe}, MaxResponseBytes: oauth.MaxResponseBytes})
			if err != nil {
				t.Fatal(err)
			}
			allowed := StaticIssuers{legitIssuer}
			if c.allowTenant {
				allowed = append(allowed, tenant.URL)
			}
			r := &CredentialReconciler{Client: api, APIReader: api, HTTPClient: hc, Issuers: allowed}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "attacker"}}); err != nil {
				t.Fatal(err)
			}
			var got v1.McpCredential
			if err := api.Get(ctx, types.NamespacedName{Namespace: "team-a", Name: "attacker"}, &got); err != nil {
				t.Fatal(err)
			}
			ready := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionReady)
			if ready == nil || ready.Reason != c.reason || !strings.Contains(ready.Message, c.named) {
				t.Fatalf("Ready = %+v, want reason %s naming %s", ready, c.reason, c.named)
			}
			if n := received.Load() - before; n != 0 {
				t.Fatalf("the tenant's server received %d requests, want none", n)
			}
			// Nothing the producer did not create, or that another McpCredential owns, changed.
			for _, want := range []*corev1.Secret{victimRefresh, victimTarget, bearer, saToken, unbound, boundNotOwned} {
				var sec corev1.Secret
				if err := api.Get(ctx, client.ObjectKeyFromObject(want), &sec); err != nil {
					t.Fatal(err)
				}
				if string(sec.Data[v1.RefreshTokenKey]) != string(want.Data[v1.RefreshTokenKey]) || sec.ResourceVersion != "999" {
					t.Fatalf("Secret %s was written (resourceVersion %s)", want.Name, sec.ResourceVersion)
				}
			}
			for _, m := range []string{"victim-refresh-token", "static-bearer", "sa-jwt", "unbound-value", tenant.URL} {
				if strings.Contains(ready.Message, m) {
					t.Fatalf("the message carries %q: %s", m, ready.Message)
				}
			}
		})
	}
}

// An issuer an administrator removes from the ceiling stops being spent: the next pass marks the
// token already produced into the target Secret unusable (credential-state IssuerNotAllowed, which
// the spender refuses), sends nothing, and retries (Reconciling) in case a policy allows it again.
// Twin: with the issuer allowed, the same fresh token is kept (TokenFresh, no request).
func TestCredentialIssuerRemovedFromTheCeilingMarksTheTargetUnusable(t *testing.T) {
	srv, received := countingServer(t)
	s := newMetricsScheme(t)
	if err := corev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		allowed StaticIssuers
		reason  string
		state   string
	}{
		{"issuer allowed (twin)", StaticIssuers{srv.URL}, v1.ReasonTokenFresh, v1.CredentialStateReady},
		{"issuer removed", nil, v1.ReasonIssuerNotAllowed, v1.ReasonIssuerNotAllowed},
	} {
		t.Run(c.name, func(t *testing.T) {
			cred := mcpCredential("gh", "uid-gh", srv.URL, srv.URL+"/mcp", "gh-oauth", nil)
			cred.Status.ObservedGeneration = 1
			target := teamASecret("gh", map[string]string{v1.CredentialProducerLabel: "gh"}, map[string][]byte{v1.CredentialTokenKey: []byte("at")})
			target.Annotations = map[string]string{v1.CredentialAllowedHostsAnnotation: "127.0.0.1",
				v1.CredentialStateAnnotation: v1.CredentialStateReady, v1.CredentialExpiryAnnotation: time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}
			if err := controllerutil.SetControllerReference(cred, target, s); err != nil {
				t.Fatal(err)
			}
			api := fake.NewClientBuilder().WithScheme(s).WithObjects(cred, target).WithStatusSubresource(&v1.McpCredential{}).Build()
			r := &CredentialReconciler{Client: api, Issuers: c.allowed, HTTPClient: srv.Client(), RetryInterval: time.Minute}
			ctx := context.Background()
			res, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "gh"}})
			if err != nil {
				t.Fatal(err)
			}
			var got v1.McpCredential
			if err := api.Get(ctx, types.NamespacedName{Namespace: "team-a", Name: "gh"}, &got); err != nil {
				t.Fatal(err)
			}
			if ready := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionReady); ready == nil || ready.Reason != c.reason {
				t.Fatalf("Ready = %+v, want %s", ready, c.reason)
			}
			var sec corev1.Secret
			if err := api.Get(ctx, client.ObjectKeyFromObject(target), &sec); err != nil {
				t.Fatal(err)
			}
			if st := sec.Annotations[v1.CredentialStateAnnotation]; st != c.state {
				t.Fatalf("target credential-state %q, want %q", st, c.state)
			}
			if c.reason == v1.ReasonIssuerNotAllowed && (res.RequeueAfter != time.Minute ||
				meta.FindStatusCondition(got.Status.Conditions, v1.ConditionReconciling) == nil) {
				t.Fatalf("not retried as Reconciling: %+v %+v", res, got.Status.Conditions)
			}
			if n := received.Load(); n != 0 {
				t.Fatalf("%d requests sent", n)
			}
		})
	}
}
