package controllers

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
