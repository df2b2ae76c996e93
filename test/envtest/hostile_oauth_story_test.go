package envtest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/controllers"
	"github.com/b10x/connector-mcp/internal/oauthtest"
)

// allowIssuers is the cluster administrator allowing OAuth issuers for namespace ns: an
// McpTrustPolicy selecting ns by kubernetes.io/metadata.name with spec.oauth.allowedIssuers
// (created, or extended by a later call). It is deleted when the test ends.
func allowIssuers(t *testing.T, ns string, issuers ...string) {
	t.Helper()
	ctx := context.Background()
	tp := &apiv1.McpTrustPolicy{ObjectMeta: metav1.ObjectMeta{Name: ns + "-oauth"}}
	err := k8sClient.Get(ctx, client.ObjectKeyFromObject(tp), tp)
	switch {
	case apierrors.IsNotFound(err):
		tp.Spec.NamespaceSelector = metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}
		tp.Spec.OAuth.AllowedIssuers = issuers
		mustCreate(t, tp)
		t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), tp) })
	case err != nil:
		t.Fatal(err)
	default:
		mutate(t, tp, func(p *apiv1.McpTrustPolicy) {
			for _, i := range issuers {
				if !slices.Contains(p.Spec.OAuth.AllowedIssuers, i) {
					p.Spec.OAuth.AllowedIssuers = append(p.Spec.OAuth.AllowedIssuers, i)
				}
			}
		})
	}
}

// ownedBy returns a refresh-token Secret as mcpctl login --to-secret writes it for mc (created):
// opted in, bound to mc by name, controlled by mc.
func ownedBy(mc *apiv1.McpCredential, name string, data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: mc.Namespace, Name: name,
		Labels:          map[string]string{apiv1.CredentialLabel: "true", apiv1.CredentialBindingLabel: mc.Name},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(mc, apiv1.GroupVersion.WithKind("McpCredential"))}},
		Data: data}
}

// TestStoryHostileTenantCannotAimTheProducer (issue 21, finding 1): a team logs in and its
// McpCredential is produced under an issuer its namespace may use. A tenant of the same namespace
// with McpCredential write rights then tries to make the hosted producer spend the team's refresh
// token, and a static bearer of the namespace, at its own server: with its own issuer (outside the
// ceiling: IssuerNotAllowed, oauth_issuer_not_allowed) and with the allowed issuer
// (oauth_secret_of_another_credential, oauth_secret_is_bearer). Its server receives nothing, the
// allowed issuer sees no refresh, the team's Secrets keep their values. Admission refuses a trust
// policy that would allow a plain-http issuer elsewhere than loopback.
func TestStoryHostileTenantCannotAimTheProducer(t *testing.T) {
	ns := newNamespace(t, "hostile-oauth")
	const clientSecret = "hostile-client-s3cret"
	as := oauthtest.NewAuthServer(t, oauthtest.Config{AccessTokenTTL: time.Hour, Preregistered: map[string]string{"connector-mcp": clientSecret}})
	rs := oauthtest.NewResourceServer(t, as)
	var received atomic.Int64
	tenant := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		received.Add(1)
		http.NotFound(w, nil)
	}))
	t.Cleanup(tenant.Close)
	startOperator(t, ns, devOptions())
	allowIssuers(t, ns, as.Issuer)

	// The team's legitimate credential: logged in, bound, owned, produced.
	workstationLogin(t, rs, ns, "gh", "connector-mcp", clientSecret, []string{oauthtest.BaseScope})
	waitObj(t, &apiv1.McpCredential{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gh"}}, storyTimeout, "Ready", isReady[*apiv1.McpCredential])
	bearer := newSecret(ns, "github-pat", apiv1.RefreshTokenKey, "static-bearer-not-to-leak")
	mustCreate(t, bearer)
	// The team's producer has settled (a pass that read a status not yet in the cache may refresh
	// once more): its refresh token and the issuer's refresh count hold still for a second.
	var teamRefresh string
	var refreshes int
	eventually(t, storyTimeout, "the team's credential settled", func() error {
		rt, n := secretValue(t, ns, "gh-oauth", apiv1.RefreshTokenKey), as.Counts().Refreshes
		time.Sleep(time.Second)
		if rt != secretValue(t, ns, "gh-oauth", apiv1.RefreshTokenKey) || n != as.Counts().Refreshes {
			return errString("still refreshing")
		}
		teamRefresh, refreshes = rt, n
		return nil
	})

	for _, c := range []struct {
		name, issuer, resource, secret string
		reason, refusal                string
		stalled                        bool
	}{
		{"own-issuer", tenant.URL, tenant.URL + "/mcp", "gh-oauth", apiv1.ReasonIssuerNotAllowed, controllers.RefusalOAuthIssuerNotAllowed, false},
		{"own-issuer-bearer", tenant.URL, tenant.URL + "/mcp", "github-pat", apiv1.ReasonIssuerNotAllowed, controllers.RefusalOAuthIssuerNotAllowed, false},
		{"team-refresh", as.Issuer, rs.URL, "gh-oauth", apiv1.ReasonSecretRefused, controllers.RefusalOAuthSecretOfAnotherCredential, false},
		{"bearer", as.Issuer, rs.URL, "github-pat", apiv1.ReasonSecretRefused, controllers.RefusalOAuthSecretIsBearer, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			mustCreate(t, &apiv1.McpCredential{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: c.name}, Spec: apiv1.McpCredentialSpec{
				Resource: c.resource, Issuer: c.issuer, Grant: apiv1.GrantAuthorizationCode,
				Client: apiv1.OAuthClientRegistration{Registration: apiv1.RegistrationPreregistered, ClientID: "connector-mcp",
					ClientSecretRef: &apiv1.SecretKeyReference{Name: c.secret, Key: apiv1.ClientSecretKey}},
				RefreshTokenSecretRef: &apiv1.SecretKeyReference{Name: c.secret, Key: apiv1.RefreshTokenKey}, TargetSecretName: c.name}})
			mc := waitObj(t, &apiv1.McpCredential{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: c.name}}, storyTimeout, c.refusal,
				func(m *apiv1.McpCredential) bool {
					r := condOf(m, apiv1.ConditionReady)
					return r.Reason == c.reason && strings.Contains(r.Message, c.refusal)
				})
			if !hasCondition(mc, apiv1.ConditionReconciling, metav1.ConditionTrue, c.reason) {
				t.Fatalf("the refusal is not Reconciling (another object can fix it): %+v", mc.Status.Conditions)
			}
			if n := received.Load(); n != 0 {
				t.Fatalf("the tenant's server received %d requests", n)
			}
			if tok, _ := targetToken(t, ns, c.name); tok != "" {
				t.Fatal("a token was produced for the tenant")
			}
		})
	}
	if got := as.Counts().Refreshes; got != refreshes {
		t.Fatalf("the team's refresh token was redeemed %d more times", got-refreshes)
	}
	if secretValue(t, ns, "gh-oauth", apiv1.RefreshTokenKey) != teamRefresh || secretValue(t, ns, "github-pat", apiv1.RefreshTokenKey) != "static-bearer-not-to-leak" {
		t.Fatal("a Secret the tenant named was written")
	}

	// Admission: a trust policy cannot allow a plain-http issuer off loopback; https is accepted.
	bad := &apiv1.McpTrustPolicy{ObjectMeta: metav1.ObjectMeta{Name: ns + "-plain"}, Spec: apiv1.McpTrustPolicySpec{
		NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
		OAuth:             apiv1.TrustOAuthCeiling{AllowedIssuers: []string{"http://auth.example.com"}}}}
	if err := k8sClient.Create(context.Background(), bad); err == nil || !strings.Contains(err.Error(), "allowedIssuers must be https URLs") {
		t.Fatalf("a plain-http issuer was admitted: %v", err)
	}
	bad.Spec.OAuth.AllowedIssuers = []string{"https://auth.example.com"}
	mustCreate(t, bad)
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), bad) })
}
