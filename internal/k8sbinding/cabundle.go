package k8sbinding

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
)

// MaxCABundleBytes bounds the PEM text of one CA bundle.
const MaxCABundleBytes = 1 << 20

// Stable refusal names of a connection's CA bundle (spec.mcpConnection.caBundleRef).
const (
	// RefusalCABundleNotFound: no ConfigMap of that name labelled
	// connectors.b10x.io/ca-bundle=true exists in the namespace, or it has no such key. An
	// unlabelled ConfigMap and an absent one are indistinguishable on purpose (the manager's
	// cache holds only labelled ConfigMaps). It may clear by itself: retried.
	RefusalCABundleNotFound = "ca_bundle_not_found"
	// RefusalCABundleInvalid: the key holds no PEM certificate, something other than
	// certificates, a certificate that does not parse, or more than MaxCABundleBytes.
	RefusalCABundleInvalid = "ca_bundle_invalid"
)

// ErrCABundleRefused matches every [*CABundleError].
var ErrCABundleRefused = errors.New("k8sbinding: CA bundle refused")

// CABundleRef addresses one key of a ConfigMap in the consumer's namespace holding PEM CA
// certificates.
type CABundleRef struct {
	// Name is the ConfigMap's name.
	Name string
	// Key is the key within its data (or binaryData).
	Key string
}

// CABundleError is a named refusal of a connection's CA bundle. It names the reference, never
// the ConfigMap's contents.
type CABundleError struct {
	// Ref is the refused reference.
	Ref CABundleRef
	// Name is RefusalCABundleNotFound or RefusalCABundleInvalid.
	Name string
}

func (e *CABundleError) Error() string {
	return fmt.Sprintf("k8sbinding: CA bundle %s/%s refused: %s", e.Ref.Name, e.Ref.Key, e.Name)
}

// Refusal returns the stable refusal name.
func (e *CABundleError) Refusal() string { return e.Name }

// Unwrap returns [ErrCABundleRefused].
func (e *CABundleError) Unwrap() error { return ErrCABundleRefused }

// Transient reports whether the refusal may clear without a spec change (the ConfigMap may be
// created or labelled later).
func (e *CABundleError) Transient() bool { return e.Name == RefusalCABundleNotFound }

// CABundleCacheSelector is the manager cache's ConfigMap selector: only ConfigMaps labelled
// connectors.b10x.io/ca-bundle=true are cached, so the operator holds no other ConfigMap of any
// namespace.
func CABundleCacheSelector() cache.ByObject {
	return cache.ByObject{Label: labels.SelectorFromSet(labels.Set{apiv1.CABundleLabel: "true"})}
}

// LoadCABundle reads ref in namespace through r and returns its certificates as a pool. The
// ConfigMap must carry apiv1.CABundleLabel="true" (checked here too, for readers that are not
// the label-filtered cache). A read failure other than not-found wraps
// ErrClusterPolicyUnavailable.
func LoadCABundle(ctx context.Context, r client.Reader, namespace string, ref CABundleRef) (*x509.CertPool, error) {
	cm := &corev1.ConfigMap{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &CABundleError{Ref: ref, Name: RefusalCABundleNotFound}
		}
		return nil, fmt.Errorf("%w: CA bundle ConfigMap: %w", ErrClusterPolicyUnavailable, err)
	}
	if cm.Labels[apiv1.CABundleLabel] != "true" {
		return nil, &CABundleError{Ref: ref, Name: RefusalCABundleNotFound}
	}
	var data []byte
	if v, ok := cm.Data[ref.Key]; ok {
		data = []byte(v)
	} else if v, ok := cm.BinaryData[ref.Key]; ok {
		data = v
	} else {
		return nil, &CABundleError{Ref: ref, Name: RefusalCABundleNotFound}
	}
	pool, err := ParseCABundle(data)
	if err != nil {
		return nil, &CABundleError{Ref: ref, Name: RefusalCABundleInvalid}
	}
	return pool, nil
}

// ErrInvalidCABundle is returned by [ParseCABundle] for anything but a bounded, non-empty
// sequence of PEM CERTIFICATE blocks that parse.
var ErrInvalidCABundle = errors.New("k8sbinding: invalid CA bundle")

// ParseCABundle parses PEM CA certificates strictly: at most MaxCABundleBytes, at least one
// block, every block a CERTIFICATE that parses, nothing but whitespace between blocks.
func ParseCABundle(data []byte) (*x509.CertPool, error) {
	if len(data) > MaxCABundleBytes {
		return nil, fmt.Errorf("%w: over %d bytes", ErrInvalidCABundle, MaxCABundleBytes)
	}
	pool := x509.NewCertPool()
	n := 0
	rest := data
	for {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("%w: a %q block", ErrInvalidCABundle, blk.Type)
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: certificate %d does not parse", ErrInvalidCABundle, n+1)
		}
		pool.AddCert(c)
		n++
	}
	for _, b := range rest {
		if b != ' ' && b != '\t' && b != '\r' && b != '\n' {
			return nil, fmt.Errorf("%w: trailing data after certificate %d", ErrInvalidCABundle, n)
		}
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: no certificate", ErrInvalidCABundle)
	}
	return pool, nil
}
