package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/oauthk8s"
	"github.com/b10x/connector-mcp/internal/oauthtest"
)

// login --to-secret runs the browser flow and hands the grant to the cluster (refresh-token
// Secret + McpCredential), keeps nothing locally and prints no token; auth status --secret shows
// the binding, expiry and scopes, never a value.
func TestLoginToSecretAndClusterAuthStatus(t *testing.T) {
	c, kubeenv := reviewEnv(t)
	ctx := context.Background()
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "mcpctl-login-"}}
	if err := c.Create(ctx, nsObj); err != nil {
		t.Fatal(err)
	}
	ns := nsObj.Name
	const secret = "cli-client-s3cret" //nolint:gosec // a test client's secret, asserted never to be printed
	as := oauthtest.NewAuthServer(t, oauthtest.Config{Preregistered: map[string]string{"connector-mcp": secret}})
	rs := oauthtest.NewResourceServer(t, as)
	state := filepath.Join(t.TempDir(), "state")
	getenv := func(k string) string {
		switch k {
		case "CLIENT_SECRET":
			return secret
		case "XDG_STATE_HOME":
			return state
		}
		return kubeenv(k)
	}
	playBrowser(t)

	code, out, errOut := runServerCLI(t, getenv, "login", "--url", rs.URL, "--to-secret", ns+"/gh", "--client-id", "connector-mcp",
		"--client-secret-env", "CLIENT_SECRET", "--scope", oauthtest.BaseScope, "--timeout", "30s")
	if code != exitOK {
		t.Fatalf("login --to-secret: exit %d: %s", code, errOut)
	}
	for _, s := range append(as.Issued(), secret) {
		if strings.Contains(out+errOut, s) {
			t.Fatalf("login --to-secret printed a token or secret:\n%s\n%s", out, errOut)
		}
	}
	var printed struct {
		MCPCredential string         `json:"mcpCredential"`
		Credential    credentialView `json:"credential"`
	}
	if err := json.Unmarshal([]byte(out), &printed); err != nil || printed.MCPCredential != ns+"/gh" || printed.Credential.Issuer != as.Issuer {
		t.Fatalf("login --to-secret output: %v\n%s", err, out)
	}
	if files, _ := filepath.Glob(filepath.Join(state, "connector-mcp", "oauth", "credentials", "*")); len(files) != 0 {
		t.Fatalf("login --to-secret kept a local credential: %v", files)
	}
	var sec corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "gh" + oauthk8s.OAuthSecretSuffix}, &sec); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(as.RefreshTokens(), string(sec.Data[apiv1.RefreshTokenKey])) || string(sec.Data[apiv1.ClientSecretKey]) != secret ||
		sec.Labels[apiv1.CredentialLabel] != "true" || sec.Annotations[apiv1.CredentialAllowedHostsAnnotation] != "" {
		t.Fatalf("refresh-token Secret: labels %v annotations %v keys %d", sec.Labels, sec.Annotations, len(sec.Data))
	}
	var mc apiv1.McpCredential
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "gh"}, &mc); err != nil {
		t.Fatal(err)
	}
	// Bound to the McpCredential and controlled by it: the only refresh-token Secret the
	// producer redeems and writes a rotated token into.
	if sec.Labels[apiv1.CredentialBindingLabel] != "gh" || !metav1.IsControlledBy(&sec, &mc) {
		t.Fatalf("refresh-token Secret not bound to and owned by McpCredential gh: labels %v owners %+v", sec.Labels, sec.OwnerReferences)
	}
	if mc.Spec.Resource != rs.URL || mc.Spec.Issuer != as.Issuer || mc.Spec.Client.Registration != apiv1.RegistrationPreregistered ||
		mc.Spec.Client.ClientSecretRef == nil || mc.Spec.TargetSecretName != "gh" || !slices.Equal(mc.Spec.Scopes, []string{oauthtest.BaseScope}) {
		t.Fatalf("McpCredential spec: %+v", mc.Spec)
	}

	// Twins: no namespace is a usage error; an McpCredential mcpctl did not write is not overwritten.
	if code, _, _ := runServerCLI(t, getenv, "login", "--url", rs.URL, "--to-secret", "gh"); code != exitUsage {
		t.Fatalf("--to-secret without a namespace: exit %d, want usage", code)
	}
	foreign := mc.DeepCopy()
	foreign.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: "theirs"}
	if err := c.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runServerCLI(t, getenv, "login", "--url", rs.URL, "--to-secret", ns+"/theirs", "--client-id", "connector-mcp",
		"--client-secret-env", "CLIENT_SECRET", "--timeout", "30s")
	if code != exitFailure || !strings.Contains(errOut, "was not written by mcpctl login") {
		t.Fatalf("login over a foreign McpCredential: exit %d: %s", code, errOut)
	}

	// auth status --secret: what the manager would have written (status, target Secret).
	exp := metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	mc.Status.Expiry, mc.Status.Scopes, mc.Status.ObservedGeneration = &exp, []string{oauthtest.BaseScope}, mc.Generation
	meta.SetStatusCondition(&mc.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "TokenFresh", Message: "a fresh access token is in Secret \"gh\""})
	if err := c.Status().Update(ctx, &mc); err != nil {
		t.Fatal(err)
	}
	const value = "at-the-value-never-shown"
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gh",
		Labels:      map[string]string{apiv1.CredentialLabel: "true"},
		Annotations: map[string]string{apiv1.CredentialStateAnnotation: apiv1.CredentialStateReady}},
		Data: map[string][]byte{apiv1.CredentialTokenKey: []byte(value)}}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runServerCLI(t, getenv, "auth", "status", "--secret", ns+"/gh", "-o", "json")
	var st oauthk8s.Status
	if code != exitOK || json.Unmarshal([]byte(out), &st) != nil {
		t.Fatalf("auth status --secret -o json: exit %d: %s%s", code, out, errOut)
	}
	if st.Resource != rs.URL || st.Issuer != as.Issuer || st.Expiry == nil || !st.Expiry.Equal(exp.Time) || !st.Ready ||
		st.State != apiv1.CredentialStateReady || !slices.Equal(st.Scopes, []string{oauthtest.BaseScope}) {
		t.Fatalf("auth status --secret: %+v", st)
	}
	code, human, _ := runServerCLI(t, getenv, "auth", "status", "--secret", ns+"/gh")
	if code != exitOK || !strings.Contains(human, "Expiry:         2026-12-01T10:00:00Z") || !strings.Contains(human, "Ready:          True (TokenFresh)") {
		t.Fatalf("auth status --secret (human): exit %d\n%s", code, human)
	}
	for _, s := range append(as.Issued(), secret, value) {
		if strings.Contains(out+human, s) {
			t.Fatalf("auth status printed a value:\n%s\n%s", out, human)
		}
	}
	if code, _, errOut := runServerCLI(t, getenv, "auth", "status", "--secret", ns+"/nope"); code != exitFailure || !strings.Contains(errOut, "NotFound") {
		t.Fatalf("auth status of a missing credential: exit %d: %s", code, errOut)
	}
	code, out, _ = runServerCLI(t, getenv, "auth", "status", "--secret", ns+"/gh", "-o", "yaml")
	var fromYAML oauthk8s.Status
	if code != exitOK || yaml.Unmarshal([]byte(out), &fromYAML) != nil || fromYAML.Resource != st.Resource || strings.Contains(out, value) {
		t.Fatalf("auth status -o yaml: exit %d\n%s", code, out)
	}
	if code, _, _ := runServerCLI(t, getenv, "auth", "status", "--secret", ns+"/gh", "-o", "xml"); code != exitUsage {
		t.Fatalf("auth status -o xml: exit %d, want usage", code)
	}
}
