package controllers

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/mcpclient/oauth"
)

// refreshDue keeps a Ready token until expiry − skew, and refreshes in every other case.
func TestRefreshDue(t *testing.T) {
	now := time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC)
	cred := func(gen, observed int64) *v1.McpCredential {
		c := &v1.McpCredential{ObjectMeta: metav1.ObjectMeta{Generation: gen}}
		c.Status.ObservedGeneration = observed
		return c
	}
	sec := func(state, expiry string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
			v1.CredentialStateAnnotation: state, v1.CredentialExpiryAnnotation: expiry}}}
	}
	in := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	for _, c := range []struct {
		name  string
		c     *v1.McpCredential
		s     *corev1.Secret
		fresh bool
	}{
		{"ready, expiry beyond the skew", cred(1, 1), sec(v1.CredentialStateReady, in(10*time.Minute)), true},
		{"ready, inside the skew", cred(1, 1), sec(v1.CredentialStateReady, in(4*time.Minute)), false},
		{"expired", cred(1, 1), sec(v1.CredentialStateReady, in(-time.Minute)), false},
		{"no target Secret", cred(1, 1), nil, false},
		{"spec changed since", cred(2, 1), sec(v1.CredentialStateReady, in(time.Hour)), false},
		{"marked ReauthorizationRequired", cred(1, 1), sec(v1.ReasonReauthorizationRequired, in(time.Hour)), false},
		{"unknown expiry", cred(1, 1), sec(v1.CredentialStateReady, ""), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			due, _, fresh := refreshDue(c.c, c.s, 5*time.Minute, now)
			if fresh != c.fresh {
				t.Fatalf("fresh = %v, want %v", fresh, c.fresh)
			}
			if fresh && !due.Equal(now.Add(5*time.Minute)) {
				t.Fatalf("due %v, want expiry − skew", due)
			}
		})
	}
}

// Each token failure maps to its own reason; only a transport failure is retried, and no
// message carries the server's prose.
func TestTokenFailure(t *testing.T) {
	for _, c := range []struct {
		err       error
		reason    string
		transient bool
	}{
		{&oauth.BindingError{What: "resource"}, v1.ReasonResourceMismatch, false},
		{&oauth.BindingError{What: "issuer"}, v1.ReasonIssuerMismatch, false},
		{&oauth.BindingError{What: "token_endpoint"}, v1.ReasonIssuerMismatch, false},
		{&oauth.RefreshError{Code: "invalid_grant"}, v1.ReasonReauthorizationRequired, false},
		{&oauth.RefreshError{Code: "server_error"}, v1.ReasonRefreshFailed, true},
		{errors.New("dial tcp: SERVER-PROSE"), v1.ReasonRefreshFailed, true},
	} {
		o := tokenFailure(c.err)
		if o.reason != c.reason || o.transient != c.transient {
			t.Errorf("%v: got %s/%v, want %s/%v", c.err, o.reason, o.transient, c.reason, c.transient)
		}
		if strings.Contains(o.message, "SERVER-PROSE") {
			t.Errorf("%v: message carries prose: %q", c.err, o.message)
		}
		if !c.transient && o.state != c.reason {
			t.Errorf("%v: the target Secret is not marked with the reason (state %q)", c.err, o.state)
		}
	}
}

// Ready True only for TokenFresh; a verdict that needs a human is Stalled, a retried one
// Reconciling (kstatus: Current, Failed, InProgress).
func TestCredentialConditions(t *testing.T) {
	if cs := credentialConditions(v1.ReasonTokenFresh, "m", false); len(cs) != 1 || cs[0].Status != metav1.ConditionTrue {
		t.Fatalf("fresh: %+v", cs)
	}
	for reason, second := range map[string]string{
		v1.ReasonReauthorizationRequired: v1.ConditionStalled, v1.ReasonInsufficientScope: v1.ConditionStalled, v1.ReasonIssuerMismatch: v1.ConditionStalled,
		v1.ReasonTargetSecretConflict: v1.ConditionStalled, v1.ReasonSecretRefused: v1.ConditionReconciling,
	} {
		cs := credentialConditions(reason, "m", false)
		if len(cs) != 2 || cs[0].Type != v1.ConditionReady || cs[0].Status != metav1.ConditionFalse || cs[0].Reason != reason || cs[1].Type != second {
			t.Errorf("%s: %+v", reason, cs)
		}
	}
	if cs := credentialConditions(v1.ReasonRefreshFailed, "m", true); cs[1].Type != v1.ConditionReconciling {
		t.Errorf("transient: %+v", cs)
	}
}

// A refused token request names the registered OAuth error code only.
func TestTokenFailureNamesRegisteredCode(t *testing.T) {
	if o := tokenFailure(&oauth.RefreshError{Code: "temporarily_unavailable"}); !strings.HasSuffix(o.message, ": temporarily_unavailable") {
		t.Fatalf("message %q does not name the code", o.message)
	}
	if o := tokenFailure(&oauth.RefreshError{}); !strings.HasSuffix(o.message, ": token_request_failed") {
		t.Fatalf("message %q, want the fallback name", o.message)
	}
}

// The issuer ceiling of a namespace is the platform's issuers plus those of the McpTrustPolicies
// that select it, resolved as the egress ceiling is; a policy selecting another namespace adds
// nothing.
func TestTrustPolicyIssuers(t *testing.T) {
	s := newMetricsScheme(t)
	if err := corev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	policy := func(name, ns string, issuers ...string) *v1.McpTrustPolicy {
		return &v1.McpTrustPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.McpTrustPolicySpec{
			NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			OAuth:             v1.TrustOAuthCeiling{AllowedIssuers: issuers}}}
	}
	nsObj := func(name string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/metadata.name": name}}}
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(nsObj("team-a"), nsObj("team-b"),
		policy("a", "team-a", "https://auth.team-a.example"), policy("b", "team-b", "https://auth.team-b.example")).Build()
	ti := &TrustPolicyIssuers{Reader: c, Platform: []string{"https://auth.platform.example"}}
	got, err := ti.AllowedIssuers(context.Background(), "team-a")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "https://auth.platform.example,https://auth.team-a.example" {
		t.Fatalf("team-a ceiling %v", got)
	}
	if _, err := ti.AllowedIssuers(context.Background(), "absent"); err == nil {
		t.Fatal("an unreadable namespace gave a ceiling; want an error (fail closed)")
	}
}

// checkAim: an issuer is allowed only when it equals a ceiling entry exactly; the resource must
// be https (plain http to loopback only).
func TestCheckAim(t *testing.T) {
	allowed := []string{"https://auth.example.com", "http://127.0.0.1:8080"}
	for _, c := range []struct {
		issuer, resource, reason string
	}{
		{"https://auth.example.com", "https://mcp.example.com/mcp", ""},
		{"http://127.0.0.1:8080", "http://127.0.0.1:9090/mcp", ""},
		{"https://auth.example.com/", "https://mcp.example.com/mcp", v1.ReasonIssuerNotAllowed},
		{"https://AUTH.example.com", "https://mcp.example.com/mcp", v1.ReasonIssuerNotAllowed},
		{"https://evil.example.com", "https://mcp.example.com/mcp", v1.ReasonIssuerNotAllowed},
		{"https://auth.example.com", "http://mcp.example.com/mcp", v1.ReasonResourceNotAllowed},
		{"https://auth.example.com", "ftp://mcp.example.com/mcp", v1.ReasonResourceNotAllowed},
	} {
		cred := &v1.McpCredential{Spec: v1.McpCredentialSpec{Issuer: c.issuer, Resource: c.resource}}
		o := checkAim(cred, allowed)
		switch {
		case c.reason == "" && o != nil:
			t.Errorf("%s %s: refused %s", c.issuer, c.resource, o.reason)
		case c.reason != "" && (o == nil || o.reason != c.reason):
			t.Errorf("%s %s: got %+v, want %s", c.issuer, c.resource, o, c.reason)
		}
	}
	if o := checkAim(&v1.McpCredential{Spec: v1.McpCredentialSpec{Issuer: "https://auth.example.com", Resource: "https://x"}}, nil); o == nil || !strings.Contains(o.message, RefusalOAuthIssuerNotAllowed) {
		t.Fatalf("an empty ceiling allowed an issuer: %+v", o)
	}
}

// ValidateIssuerURL: the manager's --allowed-oauth-issuers entries.
func TestValidateIssuerURL(t *testing.T) {
	for s, ok := range map[string]bool{
		"https://auth.example.com": true, "https://auth.example.com/tenant": true, "http://127.0.0.1:8080": true, "http://[::1]:8080": true,
		"http://auth.example.com": false, "https://u@auth.example.com": false, "https://auth.example.com?x=1": false,
		"https://auth.example.com#f": false, "auth.example.com": false, "": false, "http://localhost:8080": false,
	} {
		if err := ValidateIssuerURL(s); (err == nil) != ok {
			t.Errorf("%q: %v, want ok=%v", s, err, ok)
		}
	}
}

// The issuer ceiling is fixed by another object (a trust policy): Reconciling. A resource that
// is not https needs its author: Stalled.
func TestCredentialConditionsOfTheCeiling(t *testing.T) {
	if cs := credentialConditions(v1.ReasonIssuerNotAllowed, "m", false); cs[1].Type != v1.ConditionReconciling {
		t.Errorf("IssuerNotAllowed: %+v", cs)
	}
	if cs := credentialConditions(v1.ReasonResourceNotAllowed, "m", false); cs[1].Type != v1.ConditionStalled {
		t.Errorf("ResourceNotAllowed: %+v", cs)
	}
}
