package egress

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// SecretStore fetches credential bytes by reference. The transport calls it for every
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

// KubernetesSecretStore reads credentials from Kubernetes Secrets of one namespace — the
// namespace of the consuming object. It reads only the named key of the named Secret.
//
// Give it an uncached reader (manager.GetAPIReader()) so that the operator needs only "get" on
// the Secrets it is pointed at and does not cache every Secret of the cluster.
type KubernetesSecretStore struct {
	// Reader reads Secrets.
	Reader client.Reader
	// Namespace is the consumer's own namespace; every reference is resolved in it.
	Namespace string
}

// NewKubernetesSecretStore returns a store reading Secrets of namespace through r.
func NewKubernetesSecretStore(r client.Reader, namespace string) *KubernetesSecretStore {
	return &KubernetesSecretStore{Reader: r, Namespace: namespace}
}

// Get reads ref.Key of Secret ref.Name in the store's namespace and returns a copy of it.
func (s *KubernetesSecretStore) Get(ctx context.Context, ref CredentialRef) ([]byte, error) {
	if err := ref.Validate(); err != nil {
		return nil, err
	}
	if s.Namespace == "" {
		return nil, &CredentialError{Ref: ref, Reason: "no namespace"}
	}
	var sec corev1.Secret
	if err := s.Reader.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: ref.Name}, &sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &CredentialError{Ref: ref, Reason: "secret not found"}
		}
		return nil, &CredentialError{Ref: ref, Reason: "secret not readable", Err: fmt.Errorf("get secret: %s", apierrors.ReasonForError(err))}
	}
	v, ok := sec.Data[ref.Key]
	if !ok {
		return nil, &CredentialError{Ref: ref, Reason: "key not found"}
	}
	if len(v) == 0 {
		return nil, &CredentialError{Ref: ref, Reason: "empty"}
	}
	return append([]byte(nil), v...), nil
}
