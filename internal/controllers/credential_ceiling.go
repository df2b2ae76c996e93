package controllers

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
)

// Refusal names of the OAuth producer: what an McpCredential may aim at (issuer, resource) and
// which Secrets it may spend and write. Each is decided before any request leaves.
const (
	// RefusalOAuthIssuerNotAllowed: spec.issuer is not in the namespace's OAuth issuer ceiling
	// (--allowed-oauth-issuers and the selecting McpTrustPolicies' spec.oauth.allowedIssuers).
	RefusalOAuthIssuerNotAllowed = "oauth_issuer_not_allowed"
	// RefusalOAuthResourceNotAllowed: spec.resource is not an https URL (plain http reaches a
	// loopback address only).
	RefusalOAuthResourceNotAllowed = "oauth_resource_not_allowed"
	// RefusalOAuthSecretNotBound: the Secret does not carry
	// connectors.b10x.io/mcpcredential=<this McpCredential's name>.
	RefusalOAuthSecretNotBound = "oauth_secret_not_bound" //nolint:gosec // a refusal name, not a credential
	// RefusalOAuthSecretIsBearer: the Secret carries connectors.b10x.io/allowed-hosts: it is a
	// bearer for the hosts it names, never spent at a token endpoint.
	RefusalOAuthSecretIsBearer = "oauth_secret_is_bearer" //nolint:gosec // a refusal name, not a credential
	// RefusalOAuthSecretOfAnotherCredential: the Secret is bound to, or controlled by, another
	// McpCredential (its refresh token or its target).
	RefusalOAuthSecretOfAnotherCredential = "oauth_secret_of_another_credential" //nolint:gosec // a refusal name, not a credential
	// RefusalOAuthRefreshSecretNotOwned: the refresh-token Secret is not controlled by this
	// McpCredential (owner reference), so a rotated refresh token could not be written back; the
	// refresh token is not redeemed ("mcpctl login --to-secret" writes an owned one).
	RefusalOAuthRefreshSecretNotOwned = "oauth_refresh_secret_not_owned" //nolint:gosec // a refusal name, not a credential
)

// IssuerCeiling returns the OAuth issuers an McpCredential of a namespace may name.
type IssuerCeiling interface {
	// AllowedIssuers returns the issuer identifiers namespace may use; an error means they
	// could not be read (the producer fails closed and sends nothing).
	AllowedIssuers(ctx context.Context, namespace string) ([]string, error)
}

// TrustPolicyIssuers is the production [IssuerCeiling]: Platform (the manager's
// --allowed-oauth-issuers) plus spec.oauth.allowedIssuers of every McpTrustPolicy whose
// namespaceSelector selects the namespace, resolved as the egress ceiling is
// (k8sbinding.SelectingTrustPolicies).
type TrustPolicyIssuers struct {
	// Reader reads Namespaces and McpTrustPolicies (the manager's cache).
	Reader client.Reader
	// Platform are the issuers every namespace may use.
	Platform []string
}

// AllowedIssuers implements [IssuerCeiling].
func (t *TrustPolicyIssuers) AllowedIssuers(ctx context.Context, namespace string) ([]string, error) {
	out := slices.Clone(t.Platform)
	if t.Reader == nil {
		return out, nil
	}
	policies, err := k8sbinding.SelectingTrustPolicies(ctx, t.Reader, namespace)
	if err != nil {
		return nil, err
	}
	for _, p := range policies {
		out = append(out, p.Spec.OAuth.AllowedIssuers...)
	}
	return out, nil
}

// StaticIssuers is an [IssuerCeiling] that allows the same issuers in every namespace.
type StaticIssuers []string

// AllowedIssuers implements [IssuerCeiling].
func (s StaticIssuers) AllowedIssuers(context.Context, string) ([]string, error) {
	return slices.Clone(s), nil
}

// ValidateIssuerURL checks one entry of an issuer ceiling (--allowed-oauth-issuers): an absolute
// https URL with a host and no user information, query or fragment. Plain http is accepted for
// a loopback address only (and reaches it only when the egress policy allows loopback).
func ValidateIssuerURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil || !u.IsAbs() || u.Hostname() == "":
		return errors.New("not an absolute URL")
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(s, "?#@"):
		return errors.New("an issuer carries no user information, query or fragment")
	case !httpsOrLoopback(u):
		return errors.New("an issuer is an https URL (plain http only to a loopback address)")
	}
	return nil
}

// httpsOrLoopback reports whether u is https, or plain http to a loopback IP literal.
func httpsOrLoopback(u *url.URL) bool {
	switch u.Scheme {
	case "https":
		return true
	case "http":
		a, err := netip.ParseAddr(u.Hostname())
		return err == nil && a.IsLoopback()
	}
	return false
}

// checkAim is the pure decision whether an McpCredential may be produced at all: its issuer is
// one of allowed, exactly, and its resource is an https URL (plain http to loopback only). It
// returns nil or the refusal outcome; nothing has been sent either way.
func checkAim(c *v1.McpCredential, allowed []string) *credOutcome {
	if !slices.Contains(allowed, c.Spec.Issuer) || ValidateIssuerURL(c.Spec.Issuer) != nil {
		return &credOutcome{reason: v1.ReasonIssuerNotAllowed, state: v1.ReasonIssuerNotAllowed,
			message: RefusalOAuthIssuerNotAllowed + ": spec.issuer is not among the issuers this namespace may use (--allowed-oauth-issuers, McpTrustPolicy spec.oauth.allowedIssuers); nothing was sent"}
	}
	u, err := url.Parse(c.Spec.Resource)
	if err != nil || !u.IsAbs() || u.Hostname() == "" || !httpsOrLoopback(u) {
		return &credOutcome{reason: v1.ReasonResourceNotAllowed, state: v1.ReasonResourceNotAllowed,
			message: RefusalOAuthResourceNotAllowed + ": spec.resource must be an https URL; nothing was sent"}
	}
	return nil
}

// secretRole says what the producer does with a Secret it reads.
type secretRole int

const (
	// roleRead: the Secret's value is spent at the token endpoint (client secret).
	roleRead secretRole = iota
	// roleReadWrite: the value is spent and a rotated one written back (refresh token).
	roleReadWrite
)

// checkBound is the pure decision whether the producer of c may spend sec (and, for
// roleReadWrite, write into it): it is opted in, no ServiceAccount token, no bearer, bound to c
// by the binding label, not another McpCredential's, and (roleReadWrite) controlled by c. It
// returns "" or the refusal name.
func checkBound(sec *corev1.Secret, c *v1.McpCredential, role secretRole) string {
	if sec.Type == corev1.SecretTypeServiceAccountToken {
		return k8sbinding.RefusalCredentialServiceAccountToken
	}
	if sec.Labels[v1.CredentialLabel] != "true" {
		return k8sbinding.RefusalCredentialNotOptedIn
	}
	if sec.Annotations[v1.CredentialAllowedHostsAnnotation] != "" {
		return RefusalOAuthSecretIsBearer
	}
	if ref := metav1.GetControllerOf(sec); ref != nil && isMcpCredentialRef(ref) && (ref.UID != c.UID || ref.Name != c.Name) {
		return RefusalOAuthSecretOfAnotherCredential
	}
	switch bound := sec.Labels[v1.CredentialBindingLabel]; {
	case bound == "":
		return RefusalOAuthSecretNotBound
	case bound != c.Name:
		return RefusalOAuthSecretOfAnotherCredential
	}
	if role == roleReadWrite && !metav1.IsControlledBy(sec, c) {
		return RefusalOAuthRefreshSecretNotOwned
	}
	return ""
}

func isMcpCredentialRef(ref *metav1.OwnerReference) bool {
	return ref.Kind == "McpCredential" && strings.HasPrefix(ref.APIVersion, v1.GroupVersion.Group+"/")
}

// secretRefusal is the SecretRefused outcome of a Secret the producer may not use (name is the
// refusal), with what the user does about it.
func (r *CredentialReconciler) secretRefusal(what string, ref *v1.SecretKeyReference, name string) *credOutcome {
	hint := fmt.Sprintf("it must exist, carry %s=true and %s=<this McpCredential>, no %s, and hold key %q",
		v1.CredentialLabel, v1.CredentialBindingLabel, v1.CredentialAllowedHostsAnnotation, clip(ref.Key))
	if name == RefusalOAuthRefreshSecretNotOwned {
		hint = "the refresh token was not redeemed, since a rotated one could not be written back; run mcpctl login --to-secret to store it in a Secret this McpCredential owns"
	}
	return &credOutcome{reason: v1.ReasonSecretRefused, requeue: r.retry(),
		message: fmt.Sprintf("%s Secret %q: %s (%s)", what, clip(ref.Name), name, hint)}
}
