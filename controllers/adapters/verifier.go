package adapters

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/controllers"
	"github.com/b10x/connector-mcp/ocipack"
)

// PackVerifier pulls profile packs by digest and verifies them with ocipack.
type PackVerifier struct {
	// Verifier is the shared verifier (trusted root, (digest, policy) cache) over the
	// registry client used for anonymous pulls.
	Verifier *ocipack.Verifier
	// NewVerifier builds a verifier for a registry client with credentials from a pull secret.
	// Nil refuses pull secrets.
	NewVerifier func(c *ocipack.Client) *ocipack.Verifier
	// Registry is the template registry client (egress HTTP client, limits, plain HTTP for
	// loopback development registries).
	Registry ocipack.Client
	// Secrets reads pull secrets and public-key Secrets by name (uncached reader).
	Secrets client.Reader
	// DefaultKeyless is the cluster's default signer identity, used when a profile names none.
	DefaultKeyless *v1.KeylessIdentity
	// DefaultPublicKeyPEM is the cluster's default signing public key, used when a profile
	// names no identity and DefaultKeyless is nil.
	DefaultPublicKeyPEM []byte
	// DefaultProvenance is the cluster's default merge-verification policy, used when a
	// profile names none.
	DefaultProvenance *v1.ProvenancePolicy
	// RequireProvenance refuses a policy without a provenance (merge verification) part; when
	// false such a policy is verified on its signature alone.
	RequireProvenance bool
}

var _ controllers.SourceVerifier = (*PackVerifier)(nil)

// VerifyPack verifies and pulls one pack. The pack must hold exactly one profile document
// (ocipack refusal "ambiguous_pack" otherwise).
func (v *PackVerifier) VerifyPack(ctx context.Context, req controllers.VerifyRequest) (*controllers.VerifiedSource, error) {
	ref, err := ocipack.ParseDigestReference(req.Ref)
	if err != nil {
		return nil, stage(controllers.ReasonPackInvalid, err, "the pack reference is refused: %s", refusal(err))
	}
	api, pem, err := v.effectivePolicy(ctx, req.Namespace, req.Policy)
	if err != nil {
		return nil, err
	}
	pol, err := ocipack.PolicyFromAPI(api, pem)
	if err != nil && api.Provenance == nil && !v.RequireProvenance {
		pol.SkipProvenanceUnsafe = true
		err = pol.Validate()
	}
	if err != nil {
		return nil, stage(controllers.ReasonVerificationFailed, err, "the verification policy is refused: %s", refusal(err))
	}
	verifier := v.Verifier
	if req.PullSecret != nil {
		if v.NewVerifier == nil {
			return nil, stage(controllers.ReasonVerificationFailed, nil, "pull secrets are not enabled on this manager")
		}
		cfg, err := v.secretKey(ctx, req.Namespace, req.PullSecret.Name, corev1.DockerConfigJsonKey)
		if err != nil {
			return nil, err
		}
		creds, err := ocipack.CredentialsFromDockerConfig(cfg)
		if err != nil {
			return nil, stage(controllers.ReasonVerificationFailed, err, "pull secret %q is not a docker config", req.PullSecret.Name)
		}
		c := v.Registry
		c.Credentials = creds
		verifier = v.NewVerifier(&c)
	}
	res, pack, err := verifier.VerifyAndPull(ctx, ref, pol)
	if err != nil {
		return nil, classifyPack(err)
	}
	// The McpServiceProfile names no service within the pack: the pack must hold exactly one.
	doc, err := pack.Profile("")
	if err != nil {
		return nil, stage(controllers.ReasonPackInvalid, err, "the pack is refused: %s", refusal(err))
	}
	pd, err := ocipack.ProfileDigest(doc)
	if err != nil {
		return nil, stage(controllers.ReasonPackInvalid, err, "the profile document does not encode: %s", refusal(err))
	}
	return &controllers.VerifiedSource{Document: doc, PackDigest: ref.Digest, ProfileDigest: pd, Provenance: res.VerifiedProvenance()}, nil
}

// effectivePolicy merges the profile's policy with the cluster defaults: a missing identity or
// provenance part is taken from the defaults. It returns the public key PEM when the identity is
// a key (the profile's Secret in its own namespace, or the cluster default key).
func (v *PackVerifier) effectivePolicy(ctx context.Context, ns string, p *v1.VerifyPolicy) (*v1.VerifyPolicy, []byte, error) {
	out := &v1.VerifyPolicy{}
	if p != nil {
		out = p.DeepCopy()
	}
	if out.Provenance == nil && v.DefaultProvenance != nil {
		out.Provenance = v.DefaultProvenance.DeepCopy()
	}
	switch {
	case out.PublicKey != nil:
		pem, err := v.secretKey(ctx, ns, out.PublicKey.Name, out.PublicKey.Key)
		return out, pem, err
	case out.Keyless != nil:
		return out, nil, nil
	case v.DefaultKeyless != nil:
		out.Keyless = v.DefaultKeyless.DeepCopy()
		return out, nil, nil
	case len(v.DefaultPublicKeyPEM) > 0:
		out.PublicKey = &v1.SecretKeyReference{Name: "cluster-default", Key: "cosign.pub"}
		return out, v.DefaultPublicKeyPEM, nil
	}
	return nil, nil, stage(controllers.ReasonVerificationFailed, nil, "no identity policy: set spec.source.oci.verify or the cluster default identity")
}

func (v *PackVerifier) secretKey(ctx context.Context, ns, name, key string) ([]byte, error) {
	sec := &corev1.Secret{}
	if err := v.Secrets.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, stage(controllers.ReasonVerificationFailed, nil, "Secret %q does not exist in this namespace", name)
		}
		return nil, &controllers.StageError{Condition: controllers.TypeSourceVerified, Reason: controllers.ReasonRegistryUnavailable, Transient: true, Err: err,
			Message: fmt.Sprintf("Secret %q could not be read", name)}
	}
	val, ok := sec.Data[key]
	if !ok || len(val) == 0 {
		return nil, stage(controllers.ReasonVerificationFailed, nil, "Secret %q has no key %q", name, key)
	}
	return val, nil
}

// classifyPack maps ocipack errors onto SourceVerified reasons.
func classifyPack(err error) error {
	var reg *ocipack.RegistryError
	if errors.As(err, &reg) {
		return &controllers.StageError{Condition: controllers.TypeSourceVerified, Reason: controllers.ReasonRegistryUnavailable, Transient: true, Err: err,
			Message: "the registry could not serve the pack (" + reg.Op + "); retrying"}
	}
	switch {
	case errors.Is(err, ocipack.ErrNoSignature), errors.Is(err, ocipack.ErrNoAttestation):
		return stage(controllers.ReasonProvenanceMissing, err, "the pack has no valid provenance: %s", refusal(err))
	case errors.Is(err, ocipack.ErrUntrustedSignature), errors.Is(err, ocipack.ErrWrongIdentity), errors.Is(err, ocipack.ErrWrongIssuer),
		errors.Is(err, ocipack.ErrWrongSubjectDigest), errors.Is(err, ocipack.ErrWrongPredicateType), errors.Is(err, ocipack.ErrWrongBuilder),
		errors.Is(err, ocipack.ErrWrongSourceRepository), errors.Is(err, ocipack.ErrWrongSourceRef), errors.Is(err, ocipack.ErrInvalidPolicy),
		errors.Is(err, ocipack.ErrInvalidKey):
		return stage(controllers.ReasonVerificationFailed, err, "the pack does not satisfy the provenance policy: %s", refusal(err))
	}
	var named interface{ Refusal() string }
	if errors.As(err, &named) {
		return stage(controllers.ReasonPackInvalid, err, "the pack is refused: %s", refusal(err))
	}
	return &controllers.StageError{Condition: controllers.TypeSourceVerified, Reason: controllers.ReasonRegistryUnavailable, Transient: true, Err: err,
		Message: "the pack could not be fetched; retrying"}
}

func stage(reason string, err error, format string, args ...any) *controllers.StageError {
	return &controllers.StageError{Condition: controllers.TypeSourceVerified, Reason: reason, Err: err, Message: fmt.Sprintf(format, args...)}
}
