package envtest

// The hosted OAuth producer (issue 14): a user logs in from a workstation into the cluster
// (mcpctl login --to-secret, driven here by the test authorization server's non-interactive
// browser), the manager keeps the access token fresh in the Secret a ServiceDeployment spends,
// persists rotated refresh tokens, and marks the credential when a human is needed again; the
// deployment is refused by name. Every token request goes through the manager's egress client
// (loopback allowed explicitly, as in every story). A secret scan closes the story.

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/appoptions"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
	"github.com/b10x/connector-mcp/internal/managerapp"
	"github.com/b10x/connector-mcp/internal/oauthk8s"
	"github.com/b10x/connector-mcp/internal/oauthtest"
	"github.com/b10x/connector-mcp/mcpclient/oauth"
)

// capturedLog is the manager's whole log output.
type capturedLog struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *capturedLog) add(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.WriteString(prefix + " " + args + "\n")
}

func (l *capturedLog) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// startLoggedOperator is startOperator with the manager's log captured (every verbosity) and
// its metrics registered in reg.
func startLoggedOperator(t *testing.T, ns string, o managerapp.Options, reg *prometheus.Registry) *capturedLog {
	t.Helper()
	logs := &capturedLog{}
	shutdown := 5 * time.Second
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Logger:                  funcr.New(logs.add, funcr.Options{Verbosity: 10}),
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		Cache:                   cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}, ByObject: appoptions.CacheByObject()},
		Controller:              config.Controller{SkipNameValidation: ptr.To(true)},
		GracefulShutdownTimeout: &shutdown,
	})
	if err != nil {
		t.Fatalf("manager: %v", err)
	}
	w, err := managerapp.Setup(mgr, o, false)
	if err != nil {
		t.Fatalf("setup: %v", err)
	}
	if err := w.Metrics.Register(reg); err != nil {
		t.Fatal(err)
	}
	runManager(t, mgr)
	return logs
}

// workstationLogin is "mcpctl login --url URL --to-secret NS/NAME" with the test server's
// browser: the interactive authorization code + PKCE flow through an egress client, then the
// grant handed to the cluster. It returns the credential the login obtained.
func workstationLogin(t *testing.T, rs *oauthtest.ResourceServer, ns, name, clientID, clientSecret string, scopes []string) *oauth.Credential {
	t.Helper()
	hc, err := egress.NewHTTPClient(egress.Policy{IP: egress.IPPolicy{Loopback: egress.LoopbackAllowedUnsafe}, MaxResponseBytes: oauth.MaxResponseBytes})
	if err != nil {
		t.Fatal(err)
	}
	cred := oauthtest.Login(t, hc, rs, clientID, clientSecret, scopes)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := oauthk8s.Apply(ctx, k8sClient, ns, name, cred, apiv1.RegistrationPreregistered, scopes); err != nil {
		t.Fatalf("login --to-secret: %v", err)
	}
	return cred
}

// reviewedProfileWithToken is reviewedProfile for a server that wants a bearer.
func reviewedProfileWithToken(t *testing.T, url, token string) *apiv1.ProfileDocument {
	t.Helper()
	return reviewedProfileVia(t, url, &http.Client{Transport: bearerTransport{token}})
}

func targetToken(t *testing.T, ns, name string) (string, *corev1.Secret) {
	t.Helper()
	sec := &corev1.Secret{}
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, sec); err != nil {
		return "", nil
	}
	return string(sec.Data[apiv1.CredentialTokenKey]), sec
}

func secretValue(t *testing.T, ns, name, key string) string {
	t.Helper()
	sec := &corev1.Secret{}
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, sec); err != nil {
		t.Fatal(err)
	}
	return string(sec.Data[key])
}

func TestCredentialProducerStory(t *testing.T) {
	ns := newNamespace(t, "oauth-producer")
	const clientSecret = "client-s3cret-7f3a9c"
	as := oauthtest.NewAuthServer(t, oauthtest.Config{AccessTokenTTL: 10 * time.Minute,
		Preregistered: map[string]string{"connector-mcp": clientSecret, "m2m": clientSecret + "-m2m"}})
	rs := oauthtest.NewResourceServer(t, as)

	o := devOptions()
	// Refresh 3 s after each token is issued: the story sees several refreshes and rotations.
	o.CredentialRefreshSkew = 10*time.Minute - 3*time.Second
	// The platform's issuer, by the manager flag (the evil issuers below are allowed for this
	// namespace by an McpTrustPolicy).
	o.AllowedOAuthIssuers = []string{as.Issuer}
	reg := prometheus.NewRegistry()
	logs := startLoggedOperator(t, ns, o, reg)

	// 1. Login to a Secret from the workstation.
	loginCred := workstationLogin(t, rs, ns, "gh", "connector-mcp", clientSecret, []string{oauthtest.BaseScope})
	mc := &apiv1.McpCredential{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gh"}}
	waitObj(t, mc, storyTimeout, "Ready", isReady[*apiv1.McpCredential])
	if got := kstatusOf(t, mc); got != status.CurrentStatus {
		t.Fatalf("McpCredential kstatus = %s", got)
	}
	tok1, sec := targetToken(t, ns, "gh")
	g, ok := as.Introspect(tok1)
	if !ok || g.Resource != rs.URL || g.Issuer != as.Issuer {
		t.Fatalf("the produced token is not bound to the resource and issuer: %+v", g)
	}
	if sec.Labels[apiv1.CredentialLabel] != "true" || sec.Annotations[apiv1.CredentialAllowedHostsAnnotation] != strings.TrimPrefix(strings.TrimSuffix(rs.URL, "/mcp"), "http://") ||
		sec.Annotations[apiv1.CredentialStateAnnotation] != apiv1.CredentialStateReady {
		t.Fatalf("target Secret metadata: labels %v annotations %v", sec.Labels, sec.Annotations)
	}
	if ref := metav1.GetControllerOf(sec); ref == nil || ref.Kind != "McpCredential" || ref.UID != mc.UID {
		t.Fatalf("the target Secret is not owned by its McpCredential: %+v", sec.OwnerReferences)
	}
	if tok1 == loginCred.AccessToken {
		t.Fatal("the workstation's access token was copied into the cluster; the manager must produce its own")
	}

	// 2. A deployment spends the produced token, unchanged spender.
	doc := reviewedProfileWithToken(t, rs.URL, tok1)
	mustCreate(t, inlineProfile(ns, "gh", doc))
	makeGrant(t, ns, "gh-invokers")
	cref := &apiv1.CredentialRef{Name: "gh", Key: apiv1.CredentialTokenKey}
	sd := newDeployment(ns, "gh", "gh", "gh-provider", rs.URL, doc, cref, "gh-invokers")
	mustCreate(t, sd)
	waitObj(t, sd, storyTimeout, "Ready", isReady[*apiv1.ServiceDeployment])

	// 3. The manager refreshes before expiry, and 4. persists every rotated refresh token.
	rt0 := secretValue(t, ns, "gh-oauth", apiv1.RefreshTokenKey)
	eventually(t, storyTimeout, "a refreshed token in Secret gh", func() error {
		if tok, _ := targetToken(t, ns, "gh"); tok == tok1 || tok == "" {
			return errString("not refreshed yet")
		}
		return nil
	})
	if _, ok := as.Introspect(tok1); !ok {
		t.Fatal("the token was replaced only after it expired")
	}
	eventually(t, storyTimeout, "a rotated refresh token persisted", func() error {
		rt := secretValue(t, ns, "gh-oauth", apiv1.RefreshTokenKey)
		if rt == rt0 || rt == loginCred.RefreshToken {
			return errString("not rotated yet")
		}
		if !slices.Contains(as.RefreshTokens(), rt) {
			return errString("the persisted refresh token is not the one the server would redeem")
		}
		return nil
	})
	if slices.Contains(as.RefreshTokens(), loginCred.RefreshToken) {
		t.Fatal("the login's refresh token is still redeemable: it was never rotated")
	}

	// 5. invalid_grant → ReauthorizationRequired → the deployment is refused by name.
	as.RevokeAll()
	waitObj(t, mc, storyTimeout, "ReauthorizationRequired", func(c *apiv1.McpCredential) bool {
		return hasCondition(c, apiv1.ConditionReady, metav1.ConditionFalse, apiv1.ReasonReauthorizationRequired) &&
			hasCondition(c, apiv1.ConditionStalled, metav1.ConditionTrue, apiv1.ReasonReauthorizationRequired)
	})
	if got := kstatusOf(t, mc); got != status.FailedStatus {
		t.Fatalf("McpCredential kstatus = %s, want Failed", got)
	}
	waitEvent(t, ns, "gh", corev1.EventTypeWarning+"/"+apiv1.ReasonReauthorizationRequired)
	waitObj(t, sd, storyTimeout, "credential refused by name", func(d *apiv1.ServiceDeployment) bool {
		c := condOf(d, apiv1.ConditionReady)
		return c.Status == metav1.ConditionFalse && c.Reason == apiv1.ReasonCredentialRefused &&
			strings.Contains(c.Message, k8sbinding.RefusalCredentialReauthorizationRequired)
	})
	if !hasCondition(sd, apiv1.ConditionStalled, metav1.ConditionTrue, "") {
		t.Fatalf("the refusal is retried as transient: %+v", sd.Status.Conditions)
	}
	refreshesAfterRevoke := as.Counts().Refreshes

	// Recovery: log in again; the same objects become usable.
	relogin := workstationLogin(t, rs, ns, "gh", "connector-mcp", clientSecret, []string{oauthtest.BaseScope})
	waitObj(t, mc, storyTimeout, "Ready again", isReady[*apiv1.McpCredential])
	waitObj(t, sd, storyTimeout, "Ready again", isReady[*apiv1.ServiceDeployment])
	if as.Counts().Refreshes <= refreshesAfterRevoke {
		t.Fatal("no refresh after the new login")
	}

	// Step-up: asking for a scope the grant lacks names it; no token is written.
	mutate(t, mc, func(c *apiv1.McpCredential) { c.Spec.Scopes = []string{oauthtest.BaseScope, oauthtest.AdminScope} })
	waitObj(t, mc, storyTimeout, "InsufficientScope", func(c *apiv1.McpCredential) bool {
		r := condOf(c, apiv1.ConditionReady)
		return r.Reason == apiv1.ReasonInsufficientScope && strings.Contains(r.Message, oauthtest.AdminScope) &&
			slices.Equal(c.Status.MissingScopes, []string{oauthtest.AdminScope}) && c.Status.ObservedGeneration == c.Generation
	})
	waitObj(t, sd, storyTimeout, "credential refused as unusable", func(d *apiv1.ServiceDeployment) bool {
		return strings.Contains(condOf(d, apiv1.ConditionReady).Message, k8sbinding.RefusalCredentialUnusable)
	})

	// 6. A token endpoint on another issuer is refused before anything is sent to it.
	other := oauthtest.NewAuthServer(t, oauthtest.Config{Preregistered: map[string]string{"connector-mcp": clientSecret}})
	evil := oauthtest.NewAuthServer(t, oauthtest.Config{TokenEndpoint: other.Issuer + "/token"})
	evilRS := oauthtest.NewResourceServer(t, evil)
	allowIssuers(t, ns, evil.Issuer) // inside the ceiling: the binding check itself refuses it
	evilCred := &apiv1.McpCredential{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "evil"}, Spec: apiv1.McpCredentialSpec{
		Resource: evilRS.URL, Issuer: evil.Issuer, Grant: apiv1.GrantAuthorizationCode,
		Client:                apiv1.OAuthClientRegistration{Registration: apiv1.RegistrationPreregistered, ClientID: "connector-mcp"},
		RefreshTokenSecretRef: &apiv1.SecretKeyReference{Name: "evil-oauth", Key: apiv1.RefreshTokenKey}, TargetSecretName: "evil"}}
	mustCreate(t, evilCred)
	mustCreate(t, ownedBy(evilCred, "evil-oauth", map[string][]byte{apiv1.RefreshTokenKey: []byte("rt-evil-refresh-token-not-to-leak")}))
	evilMC := waitObj(t, &apiv1.McpCredential{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "evil"}}, storyTimeout, "IssuerMismatch",
		func(c *apiv1.McpCredential) bool {
			return hasCondition(c, apiv1.ConditionReady, metav1.ConditionFalse, apiv1.ReasonIssuerMismatch)
		})
	if !strings.Contains(condOf(evilMC, apiv1.ConditionReady).Message, "token_endpoint") {
		t.Fatalf("the refusal does not name the token endpoint: %q", condOf(evilMC, apiv1.ConditionReady).Message)
	}
	if c := other.Counts(); c != (oauthtest.Counts{}) {
		t.Fatalf("the other issuer's token endpoint was reached: %+v", c)
	}
	if tok, _ := targetToken(t, ns, "evil"); tok != "" {
		t.Fatal("a token was written for a mismatched issuer")
	}

	// ... and protected-resource metadata describing another resource is ResourceMismatch.
	foreign := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"resource":"https://elsewhere.example/mcp","authorization_servers":["` + as.Issuer + `"]}`))
	}))
	t.Cleanup(foreign.Close)
	foreignCred := &apiv1.McpCredential{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "foreign"}, Spec: apiv1.McpCredentialSpec{
		Resource: foreign.URL + "/mcp", Issuer: as.Issuer, Grant: apiv1.GrantAuthorizationCode,
		Client:                apiv1.OAuthClientRegistration{Registration: apiv1.RegistrationPreregistered, ClientID: "connector-mcp"},
		RefreshTokenSecretRef: &apiv1.SecretKeyReference{Name: "foreign-oauth", Key: apiv1.RefreshTokenKey}, TargetSecretName: "foreign"}}
	mustCreate(t, foreignCred)
	mustCreate(t, ownedBy(foreignCred, "foreign-oauth", map[string][]byte{apiv1.RefreshTokenKey: []byte("rt-evil-refresh-token-not-to-leak")}))
	waitObj(t, &apiv1.McpCredential{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "foreign"}}, storyTimeout, "ResourceMismatch",
		func(c *apiv1.McpCredential) bool {
			return hasCondition(c, apiv1.ConditionReady, metav1.ConditionFalse, apiv1.ReasonResourceMismatch)
		})

	// Machine-to-machine: the client-credentials grant, same binding rules.
	mustCreate(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m2m-client",
		Labels: map[string]string{apiv1.CredentialLabel: "true", apiv1.CredentialBindingLabel: "m2m"}},
		Data: map[string][]byte{apiv1.ClientSecretKey: []byte(clientSecret + "-m2m")}})
	mustCreate(t, &apiv1.McpCredential{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m2m"}, Spec: apiv1.McpCredentialSpec{
		Resource: rs.URL, Issuer: as.Issuer, Grant: apiv1.GrantClientCredentials, Scopes: []string{oauthtest.BaseScope},
		Client: apiv1.OAuthClientRegistration{Registration: apiv1.RegistrationPreregistered, ClientID: "m2m",
			ClientSecretRef: &apiv1.SecretKeyReference{Name: "m2m-client", Key: apiv1.ClientSecretKey}},
		TargetSecretName: "m2m-token"}})
	waitObj(t, &apiv1.McpCredential{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m2m"}}, storyTimeout, "Ready", isReady[*apiv1.McpCredential])
	m2mTok, _ := targetToken(t, ns, "m2m-token")
	if g, ok := as.Introspect(m2mTok); !ok || g.Resource != rs.URL || g.ClientID != "m2m" {
		t.Fatalf("client-credentials token not bound to the resource: %+v", g)
	}
	// Twin: a client-credentials McpCredential whose client secret Secret does not opt in is
	// refused by name and obtains nothing.
	mustCreate(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m2m-unlabelled"},
		Data: map[string][]byte{apiv1.ClientSecretKey: []byte(clientSecret + "-m2m")}})
	ccBefore := as.Counts().ClientCredentials
	mustCreate(t, &apiv1.McpCredential{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m2m-refused"}, Spec: apiv1.McpCredentialSpec{
		Resource: rs.URL, Issuer: as.Issuer, Grant: apiv1.GrantClientCredentials,
		Client: apiv1.OAuthClientRegistration{Registration: apiv1.RegistrationPreregistered, ClientID: "m2m",
			ClientSecretRef: &apiv1.SecretKeyReference{Name: "m2m-unlabelled", Key: apiv1.ClientSecretKey}},
		TargetSecretName: "m2m-refused"}})
	waitObj(t, &apiv1.McpCredential{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "m2m-refused"}}, storyTimeout, "SecretRefused",
		func(c *apiv1.McpCredential) bool {
			r := condOf(c, apiv1.ConditionReady)
			return r.Reason == apiv1.ReasonSecretRefused && strings.Contains(r.Message, k8sbinding.RefusalCredentialNotOptedIn)
		})
	if as.Counts().ClientCredentials != ccBefore {
		t.Fatal("a token was requested with a client secret from a Secret that does not opt in")
	}

	// A Secret of the target name that the McpCredential did not create is never taken over,
	// whether the manager can see it (labelled) or not (unlabelled: its creation fails).
	mustCreate(t, newSecret(ns, "taken", apiv1.CredentialTokenKey, "someone-elses-token"))
	mustCreate(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hidden"},
		Data: map[string][]byte{"password": []byte("database-password")}})
	for _, target := range []string{"taken", "hidden"} {
		// Each with its own bound client secret (m2m-client is bound to m2m only).
		mustCreate(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "over-" + target + "-client",
			Labels: map[string]string{apiv1.CredentialLabel: "true", apiv1.CredentialBindingLabel: "over-" + target}},
			Data: map[string][]byte{apiv1.ClientSecretKey: []byte(clientSecret + "-m2m")}})
		mustCreate(t, &apiv1.McpCredential{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "over-" + target}, Spec: apiv1.McpCredentialSpec{
			Resource: rs.URL, Issuer: as.Issuer, Grant: apiv1.GrantClientCredentials,
			Client: apiv1.OAuthClientRegistration{Registration: apiv1.RegistrationPreregistered, ClientID: "m2m",
				ClientSecretRef: &apiv1.SecretKeyReference{Name: "over-" + target + "-client", Key: apiv1.ClientSecretKey}},
			TargetSecretName: target}})
		waitObj(t, &apiv1.McpCredential{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "over-" + target}}, storyTimeout, "TargetSecretConflict",
			func(c *apiv1.McpCredential) bool {
				return hasCondition(c, apiv1.ConditionStalled, metav1.ConditionTrue, apiv1.ReasonTargetSecretConflict)
			})
	}
	if v := secretValue(t, ns, "taken", apiv1.CredentialTokenKey); v != "someone-elses-token" {
		t.Fatal("a labelled Secret the McpCredential did not create was overwritten")
	}
	if v := secretValue(t, ns, "hidden", "password"); v != "database-password" {
		t.Fatal("an unlabelled Secret was overwritten")
	}

	// The secret scan: no token, refresh token or client secret in logs, events, any object
	// (spec, status, metadata) of the story's kinds, or the metrics.
	secrets := append(as.Issued(), clientSecret, clientSecret+"-m2m", "rt-evil-refresh-token-not-to-leak", relogin.AccessToken)
	haystacks := map[string]string{"manager log": logs.text()}
	var evs eventsv1.EventList
	var coreEvs corev1.EventList
	var creds apiv1.McpCredentialList
	var sds apiv1.ServiceDeploymentList
	var profs apiv1.McpServiceProfileList
	for name, l := range map[string]client.ObjectList{"events": &evs, "core events": &coreEvs, "McpCredentials": &creds, "ServiceDeployments": &sds, "McpServiceProfiles": &profs} {
		if err := k8sClient.List(context.Background(), l, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		haystacks[name] = string(b)
	}
	if len(evs.Items) == 0 || !strings.Contains(haystacks["manager log"], "McpCredential") {
		t.Fatalf("the scan would be vacuous: %d events, log %d bytes", len(evs.Items), len(haystacks["manager log"]))
	}
	var metricsText bytes.Buffer
	families, err := prometheus.Gatherers{metrics.Registry, reg}.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if _, err := expfmt.MetricFamilyToText(&metricsText, f); err != nil {
			t.Fatal(err)
		}
	}
	haystacks["metrics"] = metricsText.String()
	// Positive control: the scanner finds the token where it belongs (the target Secret).
	cur, _ := targetToken(t, ns, "m2m-token")
	if !slices.Contains(secrets, cur) {
		t.Fatal("scan control: the produced token is not among the issued ones")
	}
	for where, text := range haystacks {
		for _, s := range secrets {
			if s != "" && strings.Contains(text, s) {
				t.Errorf("%s carries a secret (%d bytes into %d)", where, strings.Index(text, s), len(text))
			}
		}
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// TestMcpCredentialCRDValidation: the sample is accepted; a binding URL with user information
// or a fragment, and grant/Secret combinations the producer cannot use, are refused at admission,
// naming the field.
func TestMcpCredentialCRDValidation(t *testing.T) {
	ns := newNamespace(t, "mcpcred-crd")
	if err := create(t, ns, "sample", loadSample(t, "connectors_v1_mcpcredential.yaml")); err != nil {
		t.Fatalf("the sample is refused: %v", err)
	}
	for _, c := range []struct {
		name, field, msg string
		m                mutation
	}{
		{"userinfo", "spec.resource", "no user information", set("spec.resource", "https://user:pass@mcp.example.com/mcp")},
		{"fragment", "spec.resource", "no fragment", set("spec.resource", "https://mcp.example.com/mcp#x")},
		{"relative", "spec.resource", "absolute http(s) URL", set("spec.resource", "mcp.example.com/mcp")},
		{"issuer-query", "spec.issuer", "no user information, query or fragment", set("spec.issuer", "https://auth.example.com?x=1")},
		{"no-refresh", "spec", "refreshTokenSecretRef is required", del("spec.refreshTokenSecretRef")},
		{"cc-with-refresh", "spec", "grant ClientCredentials needs", set("spec.grant", "ClientCredentials")},
		{"cc-without-secret", "spec", "grant ClientCredentials needs", both(set("spec.grant", "ClientCredentials"), del("spec.refreshTokenSecretRef"), del("spec.client.clientSecretRef"))},
		{"scope", "spec.scopes[0]", "should match", set("spec.scopes", []any{"bad scope"})},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := loadSample(t, "connectors_v1_mcpcredential.yaml")
			c.m(t, u)
			assertRejected(t, create(t, ns, c.name, u), c.field, c.msg)
		})
	}
	// Twin of the last two: a complete ClientCredentials credential is accepted.
	u := loadSample(t, "connectors_v1_mcpcredential.yaml")
	both(set("spec.grant", "ClientCredentials"), del("spec.refreshTokenSecretRef"))(t, u)
	if err := create(t, ns, "cc-ok", u); err != nil {
		t.Fatalf("a complete ClientCredentials credential is refused: %v", err)
	}
}
