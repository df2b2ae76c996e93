package egress

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation"
)

// CredentialRef names a bearer credential: one key of one Secret in the consumer's own
// namespace. It deliberately has no namespace field: cross-namespace references cannot be
// expressed. The operator's API types mirror it.
type CredentialRef struct {
	// Name is the Secret name.
	Name string `json:"name"`
	// Key is the key inside the Secret's data.
	Key string `json:"key"`
}

// Validate checks that Name is a DNS subdomain and Key a valid Secret key.
func (r CredentialRef) Validate() error {
	if errs := validation.IsDNS1123Subdomain(r.Name); len(errs) > 0 {
		return &CredentialError{Ref: r, Reason: "invalid secret name"}
	}
	if errs := validation.IsConfigMapKey(r.Key); len(errs) > 0 {
		return &CredentialError{Ref: r, Reason: "invalid secret key"}
	}
	return nil
}

// SecretStore fetches credential bytes by reference. The Kubernetes implementation, which also
// decides whether a Secret may be spent for an endpoint at all, is
// github.com/b10x/connector-mcp/internal/k8sbinding.SecretStore. The transport calls it for every
// exchange and drops (zeroes) the returned slice once the request is assembled, so an
// implementation must return a copy it does not keep using.
type SecretStore interface {
	// Get returns the credential value, or a [*CredentialError] (matching
	// [ErrCredentialUnavailable]) that never contains the value.
	Get(ctx context.Context, ref CredentialRef) ([]byte, error)
}

// SecretStoreFunc adapts a function to [SecretStore].
type SecretStoreFunc func(ctx context.Context, ref CredentialRef) ([]byte, error)

// Get calls f.
func (f SecretStoreFunc) Get(ctx context.Context, ref CredentialRef) ([]byte, error) {
	return f(ctx, ref)
}
