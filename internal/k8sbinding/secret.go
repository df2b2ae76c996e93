package k8sbinding

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/refusal"
)

// Stable refusal names of a credential Secret that may not be spent.
const (
	// RefusalCredentialNotOptedIn: no Secret of that name carrying the label
	// connectors.b10x.io/credential=true exists in the namespace. An unlabelled Secret and an
	// absent one are indistinguishable on purpose: the manager's cache never sees unlabelled
	// Secrets, and a tenant learns nothing about Secrets it cannot read.
	RefusalCredentialNotOptedIn = "credential_not_opted_in" //nolint:gosec // a refusal name, not a credential
	// RefusalCredentialHostNotAllowed: the Secret opts in but its allowed-hosts annotation does
	// not name the endpoint's host.
	RefusalCredentialHostNotAllowed = "credential_host_not_allowed" //nolint:gosec // a refusal name, not a credential
	// RefusalCredentialServiceAccountToken: the Secret is of type
	// kubernetes.io/service-account-token; such Secrets are never spent.
	RefusalCredentialServiceAccountToken = "credential_service_account_token" //nolint:gosec // a refusal name, not a credential
	// RefusalCredentialReauthorizationRequired: the Secret is produced by an McpCredential
	// whose grant the authorization server no longer honours (invalid_grant); a human must run
	// "mcpctl login --to-secret" again. Not transient.
	RefusalCredentialReauthorizationRequired = "credential_reauthorization_required" //nolint:gosec // a refusal name, not a credential
	// RefusalCredentialUnusable: the Secret is produced by an McpCredential whose producer
	// marked the token unusable for another reason (issuer or resource mismatch, insufficient
	// scope, refused Secrets); the McpCredential's Ready condition says which.
	RefusalCredentialUnusable = "credential_unusable" //nolint:gosec // a refusal name, not a credential
	// RefusalCredentialConsentMissing: the reader may not read Secrets in the namespace (the
	// apiserver answered 403): the namespace's admin has not consented by binding the component's
	// credentials ClusterRole (or a narrower Role) to its ServiceAccount in a RoleBinding. Said
	// the same whether the Secret exists or not (RBAC decides before any lookup). Transient: it
	// clears when the consent is given.
	RefusalCredentialConsentMissing = "credential_consent_missing" //nolint:gosec // a refusal name, not a credential
	// RefusalSecretNotOwned is named in the message of the ValidatingAdmissionPolicy the chart and
	// config/rbac ship (manager-secret-writes): the apiserver denies the manager's ServiceAccount a
	// create, update, patch or delete of a Secret that no McpCredential controls (controller
	// ownerReference), so the manager never overwrites a Secret it did not create.
	RefusalSecretNotOwned = "secret_not_owned"
)

// ReasonReauthorizationRequired is the producer state (apiv1.CredentialStateAnnotation value, and
// the McpCredential's Ready reason) of a grant the authorization server answered with
// invalid_grant.
const ReasonReauthorizationRequired = "ReauthorizationRequired"

// ErrCredentialRefused matches every [*CredentialRefusal].
var ErrCredentialRefused = errors.New("k8sbinding: credential refused")

// CredentialRefusal is a named refusal to spend a Secret. It names the reference (which is not
// secret) and the rule, never the value or the Secret's annotations.
type CredentialRefusal struct {
	// Ref is the refused reference.
	Ref egress.CredentialRef
	// Name is one of the Refusal* constants.
	Name string
}

func (e *CredentialRefusal) Error() string {
	return fmt.Sprintf("k8sbinding: credential %s/%s refused: %s", e.Ref.Name, e.Ref.Key, e.Name)
}

// Refusal returns the stable refusal name.
func (e *CredentialRefusal) Refusal() string { return e.Name }

// Unwrap returns [ErrCredentialRefused].
func (e *CredentialRefusal) Unwrap() error { return ErrCredentialRefused }

// Transient reports whether the refusal may clear by itself without a spec change: a Secret
// that is not (yet) opted in may be created or labelled later. The other refusals need the
// Secret or the deployment to change.
func (e *CredentialRefusal) Transient() bool {
	return e.Name == RefusalCredentialNotOptedIn || e.Name == RefusalCredentialConsentMissing
}

// ReadSecret reads Secret name of namespace through r for ref: an absent Secret is
// RefusalCredentialNotOptedIn and a forbidden read (no consent in that namespace)
// RefusalCredentialConsentMissing, both [*CredentialRefusal]; any other error is returned as is.
// The Secret's content is not checked here (see [CheckSecret], [CheckOptIn]).
func ReadSecret(ctx context.Context, r client.Reader, namespace string, ref egress.CredentialRef) (*corev1.Secret, error) {
	sec := &corev1.Secret{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, sec); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return nil, &CredentialRefusal{Ref: ref, Name: RefusalCredentialNotOptedIn}
		case apierrors.IsForbidden(err):
			return nil, &CredentialRefusal{Ref: ref, Name: RefusalCredentialConsentMissing}
		}
		return nil, err
	}
	return sec, nil
}

// CheckSecret decides whether sec may be spent as ref's bearer for endpoint (an absolute URL)
// and returns a copy of the value. It is the single rule every spender applies:
//   - a kubernetes.io/service-account-token Secret is refused;
//   - the Secret must carry apiv1.CredentialLabel="true";
//   - a Secret an OAuth producer (McpCredential) marked with apiv1.CredentialStateAnnotation
//     other than apiv1.CredentialStateReady is refused: ReauthorizationRequired as
//     RefusalCredentialReauthorizationRequired, any other state as RefusalCredentialUnusable;
//   - apiv1.CredentialAllowedHostsAnnotation must name the endpoint's host, as "host" (any
//     port) or "host:port" (that port; the scheme's default port when the URL names none).
//     Host comparison is case-insensitive and ignores a trailing dot.
//
// A missing or empty key is an [*egress.CredentialError].
func CheckSecret(sec *corev1.Secret, ref egress.CredentialRef, endpoint string) ([]byte, error) {
	if err := CheckOptIn(sec, ref); err != nil {
		return nil, err
	}
	if state, ok := sec.Annotations[apiv1.CredentialStateAnnotation]; ok && state != apiv1.CredentialStateReady {
		if state == ReasonReauthorizationRequired {
			return nil, &CredentialRefusal{Ref: ref, Name: RefusalCredentialReauthorizationRequired}
		}
		return nil, &CredentialRefusal{Ref: ref, Name: RefusalCredentialUnusable}
	}
	host, port, err := endpointHostPort(endpoint)
	if err != nil || !HostAllowed(sec.Annotations[apiv1.CredentialAllowedHostsAnnotation], host, port) {
		return nil, &CredentialRefusal{Ref: ref, Name: RefusalCredentialHostNotAllowed}
	}
	v, ok := sec.Data[ref.Key]
	if !ok {
		return nil, &egress.CredentialError{Ref: ref, Reason: "key not found"}
	}
	if len(v) == 0 {
		return nil, &egress.CredentialError{Ref: ref, Reason: "empty"}
	}
	return append([]byte(nil), v...), nil
}

// CheckOptIn applies the part of [CheckSecret] that does not depend on where a value goes: a
// kubernetes.io/service-account-token Secret is refused, and the Secret must carry
// apiv1.CredentialLabel="true". Readers of Secrets that are never sent anywhere (a public key)
// apply it alone; everything that sends a value applies [CheckSecret].
func CheckOptIn(sec *corev1.Secret, ref egress.CredentialRef) error {
	if sec.Type == corev1.SecretTypeServiceAccountToken {
		return &CredentialRefusal{Ref: ref, Name: RefusalCredentialServiceAccountToken}
	}
	if sec.Labels[apiv1.CredentialLabel] != "true" {
		return &CredentialRefusal{Ref: ref, Name: RefusalCredentialNotOptedIn}
	}
	return nil
}

// HostAllowed reports whether the comma-separated allowed-hosts list names host (lower case,
// no trailing dot, IPv6 without brackets) on port.
func HostAllowed(list, host, port string) bool {
	for _, e := range strings.Split(list, ",") {
		e = strings.ToLower(strings.TrimSpace(e))
		if e == "" {
			continue
		}
		eh, ep, err := net.SplitHostPort(e)
		if err != nil {
			eh, ep = strings.TrimSuffix(strings.TrimPrefix(e, "["), "]"), ""
		}
		eh = strings.TrimSuffix(eh, ".")
		if eh == host && (ep == "" || ep == port) {
			return true
		}
	}
	return false
}

// endpointHostPort returns the normalised host and the port (explicit or the scheme's default)
// of an absolute http(s) URL.
func endpointHostPort(endpoint string) (string, string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return "", "", errors.New("endpoint is not an absolute URL")
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	port := u.Port()
	if port == "" {
		switch strings.ToLower(u.Scheme) {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	if host == "" {
		return "", "", errors.New("endpoint has no host")
	}
	return host, port, nil
}

// SecretStore is the Kubernetes [egress.SecretStore] for one endpoint binding: it reads one key
// of one Secret in the consumer's own namespace and spends it only under [CheckSecret].
//
// The manager gives it its cached client, whose Secret informer is filtered by
// apiv1.CredentialLabel (see [CredentialCacheSelector]), so unlabelled Secrets are never read.
// The gateway gives it an uncached reader: it may read only in namespaces that consented (a
// RoleBinding to its ServiceAccount), elsewhere the read is RefusalCredentialConsentMissing.
type SecretStore struct {
	// Reader reads Secrets.
	Reader client.Reader
	// Namespace is the consumer's own namespace; every reference is resolved in it.
	Namespace string
	// Endpoint is the bound endpoint URL the value will be sent to.
	Endpoint string
}

var _ egress.SecretStore = (*SecretStore)(nil)

// NewSecretStore returns a store reading Secrets of namespace through r for endpoint.
func NewSecretStore(r client.Reader, namespace, endpoint string) *SecretStore {
	return &SecretStore{Reader: r, Namespace: namespace, Endpoint: endpoint}
}

// Get reads ref.Key of Secret ref.Name and returns a copy of it when [CheckSecret] allows it.
func (s *SecretStore) Get(ctx context.Context, ref egress.CredentialRef) ([]byte, error) {
	if err := ref.Validate(); err != nil {
		return nil, err
	}
	if s.Namespace == "" {
		return nil, &egress.CredentialError{Ref: ref, Reason: "no namespace"}
	}
	sec, err := ReadSecret(ctx, s.Reader, s.Namespace, ref)
	if err != nil {
		var refused *CredentialRefusal
		if errors.As(err, &refused) {
			return nil, refused
		}
		return nil, &egress.CredentialError{Ref: ref, Reason: "secret not readable", Err: fmt.Errorf("get secret: %s", apierrors.ReasonForError(err))}
	}
	return CheckSecret(sec, ref, s.Endpoint)
}

// Every refusal of this package has the shared shape of the refusal package.
var (
	_ refusal.Named = (*CABundleError)(nil)
	_ refusal.Named = (*CeilingError)(nil)
	_ refusal.Named = (*CredentialRefusal)(nil)
)
