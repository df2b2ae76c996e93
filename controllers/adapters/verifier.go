package adapters

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/controllers"
	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/egress/k8sbinding"
	"github.com/b10x/connector-mcp/ocipack"
	"github.com/b10x/connector-mcp/refusal"
)

// PackVerifier pulls profile packs by digest and verifies them with ocipack under the cluster's
// trust model: the pack must satisfy one trust source that applies to the profile's namespace
// (Platform, or an McpTrustPolicy selecting it) entirely, signer and provenance from the same
// source, and then the profile's own spec.source.oci.verify, which can only add requirements.
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
	// Secrets reads pull secrets and public-key Secrets by name. The manager gives it its
	// cached client, whose Secret informer sees only Secrets labelled
	// connectors.b10x.io/credential=true (app.CacheByObject), so an un-opted Secret is never
	// read; every Secret read is also checked with k8sbinding.CheckOptIn or CheckSecret.
	Secrets client.Reader
	// Trust lists McpTrustPolicies and reads Namespaces (for namespaceSelector). Nil means no
	// McpTrustPolicy is consulted: only Platform applies.
	Trust client.Reader
	// Platform is the manager's own trust source (its --default-* flags); nil when the manager
	// trusts no signer itself.
	Platform *TrustSource
	// SkipProvenanceUnsafe accepts a trusted signer's pack on its signature alone when its
	// source lists no provenance rule (--skip-provenance-unsafe): the merge verification is
	// waived.
	SkipProvenanceUnsafe bool
	// Waived lists the checks this manager waives (WaivedProvenance, WaivedKeylessTlog); it is
	// copied into status.verified.waivedChecks of every pack verified.
	Waived []string
}

var _ controllers.SourceVerifier = (*PackVerifier)(nil)

// VerifyPack verifies and pulls one pack. The pack must hold exactly one profile document
// (ocipack refusal "ambiguous_pack" otherwise).
func (v *PackVerifier) VerifyPack(ctx context.Context, req controllers.VerifyRequest) (*controllers.VerifiedSource, error) {
	ref, err := ocipack.ParseDigestReference(req.Ref)
	if err != nil {
		return nil, stage(v1.ReasonPackInvalid, err, "the pack reference is refused: %s", refusalText(err))
	}
	sources, _, err := v.trustSources(ctx, req.Namespace)
	if err != nil {
		return nil, &controllers.StageError{Condition: v1.ConditionSourceVerified, Reason: v1.ReasonVerificationFailed, Transient: true, Err: err,
			Message: "the cluster trust policies could not be read; retrying"}
	}
	pols, cands := Candidates(sources, v.SkipProvenanceUnsafe)
	if len(pols) == 0 {
		return nil, stage(v1.ReasonUntrustedSigner, ErrNoTrustSource,
			"refused (%s): no trust source with a signer and a provenance rule applies to this namespace; a cluster administrator grants one with an McpTrustPolicy", RefusalNoTrustSource)
	}
	// The profile's own policy is checked after a trust source is satisfied; read its key first
	// so that a missing Secret is reported as such.
	var ownKey crypto.PublicKey
	if req.Policy != nil && req.Policy.PublicKey != nil {
		pem, err := v.secretKey(ctx, req.Namespace, "public-key", req.Policy.PublicKey.Name, req.Policy.PublicKey.Key, "")
		if err != nil {
			return nil, err
		}
		if ownKey, err = ocipack.ParsePublicKey(pem); err != nil {
			return nil, stage(v1.ReasonVerificationFailed, err, "the profile's verify policy is refused: %s", refusalText(err))
		}
	}
	if req.Policy != nil && req.Policy.Keyless != nil && req.Policy.Keyless.SubjectRegExp != "" {
		if err := ocipack.CheckSubjectRegExp(req.Policy.Keyless.SubjectRegExp); err != nil {
			return nil, stage(v1.ReasonVerificationFailed, err, "the profile's verify policy is refused: %s", refusalText(err))
		}
	}
	verifier := v.Verifier
	if req.PullSecret != nil {
		if v.NewVerifier == nil {
			return nil, stage(v1.ReasonVerificationFailed, nil, "pull secrets are not enabled on this manager")
		}
		// The pull secret is sent to the registry the profile names: it must opt in and name
		// that registry host, like a deployment's credential names its endpoint host.
		cfg, err := v.secretKey(ctx, req.Namespace, "pull", req.PullSecret.Name, corev1.DockerConfigJsonKey, "https://"+ref.Registry)
		if err != nil {
			return nil, err
		}
		creds, err := ocipack.CredentialsFromDockerConfig(cfg)
		if err != nil {
			return nil, stage(v1.ReasonVerificationFailed, err, "pull secret %q is not a docker config", req.PullSecret.Name)
		}
		c := v.Registry
		c.Credentials = creds
		verifier = v.NewVerifier(&c)
	}
	i, res, err := verifier.VerifyAny(ctx, ref, pols)
	if err != nil {
		return nil, classifyPack(err)
	}
	if extra := ProfilePolicy(req.Policy, ownKey, pols[i]); extra != nil {
		if _, err := verifier.Verify(ctx, ref, *extra); err != nil {
			serr := classifyPack(err)
			var se *controllers.StageError
			if errors.As(serr, &se) && !se.Transient {
				se.Message = fmt.Sprintf("the pack satisfies the cluster trust but not the profile's own verify policy (%s/%s)", RefusalProfilePolicy, refusalText(err))
			}
			return nil, serr
		}
	}
	pack, err := verifier.Pull(ctx, ref)
	if err != nil {
		return nil, classifyPack(err)
	}
	// The McpServiceProfile names no service within the pack: the pack must hold exactly one.
	doc, err := pack.Profile("")
	if err != nil {
		return nil, stage(v1.ReasonPackInvalid, err, "the pack is refused: %s", refusalText(err))
	}
	pd, err := ocipack.ProfileDigest(doc)
	if err != nil {
		return nil, stage(v1.ReasonPackInvalid, err, "the profile document does not encode: %s", refusalText(err))
	}
	prov := res.VerifiedProvenance()
	prov.TrustSource, prov.Signer = cands[i].Source, cands[i].Signer
	prov.WaivedChecks = slices.Clone(v.Waived)
	return &controllers.VerifiedSource{Document: doc, PackDigest: ref.Digest, ProfileDigest: pd, Provenance: prov}, nil
}

// secretKey reads key of Secret name in ns under the credential opt-in rule: the Secret must be
// labelled connectors.b10x.io/credential=true and must not be a ServiceAccount token
// (k8sbinding.CheckOptIn); when endpoint is set the value is sent there, so the Secret's
// allowed-hosts annotation must name its host too (k8sbinding.CheckSecret). A missing Secret
// and an unlabelled one are the same refusal: the manager's cache never sees the latter. kind
// ("pull", "public-key") names the use in refusal messages.
func (v *PackVerifier) secretKey(ctx context.Context, ns, kind, name, key, endpoint string) ([]byte, error) {
	ref := egress.CredentialRef{Name: name, Key: key}
	sec := &corev1.Secret{}
	if err := v.Secrets.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, secretRefused(kind, name, &k8sbinding.CredentialRefusal{Ref: ref, Name: k8sbinding.RefusalCredentialNotOptedIn})
		}
		return nil, &controllers.StageError{Condition: v1.ConditionSourceVerified, Reason: v1.ReasonRegistryUnavailable, Transient: true, Err: err,
			Message: fmt.Sprintf("%s Secret %q could not be read", kind, name)}
	}
	var (
		val []byte
		err error
	)
	if endpoint == "" {
		if err = k8sbinding.CheckOptIn(sec, ref); err == nil {
			val = sec.Data[key]
		}
	} else {
		val, err = k8sbinding.CheckSecret(sec, ref, endpoint)
	}
	var refused *k8sbinding.CredentialRefusal
	if errors.As(err, &refused) {
		return nil, secretRefused(kind, name, refused)
	}
	if err != nil || len(val) == 0 {
		return nil, stage(v1.ReasonVerificationFailed, nil, "%s Secret %q has no key %q", kind, name, key)
	}
	return val, nil
}

// secretRefused is the SourceVerified refusal of a Secret that did not opt in; it names the
// Secret and the k8sbinding refusal, never the Secret's data or annotations.
func secretRefused(kind, name string, r *k8sbinding.CredentialRefusal) *controllers.StageError {
	return stage(v1.ReasonCredentialRefused, r, "%s Secret %q is refused (%s): it must be labelled %s=true, not be a ServiceAccount token, and (a pull secret) name the registry host in %s",
		kind, name, r.Name, v1.CredentialLabel, v1.CredentialAllowedHostsAnnotation)
}

// classifyPack maps ocipack errors onto SourceVerified reasons.
func classifyPack(err error) error {
	var reg *ocipack.RegistryError
	if errors.As(err, &reg) {
		op := reg.Op
		var te *egress.TLSError
		if errors.As(err, &te) {
			// Named, so the platform team knows to give the manager the registry's CA
			// (--ca-bundle-file); retried, as the registry may also be mid-rotation.
			op += ": " + te.Refusal()
		}
		return &controllers.StageError{Condition: v1.ConditionSourceVerified, Reason: v1.ReasonRegistryUnavailable, Transient: true, Err: err,
			Message: "the registry could not serve the pack (" + op + "); retrying"}
	}
	switch {
	case errors.Is(err, ocipack.ErrNoSignature), errors.Is(err, ocipack.ErrNoAttestation):
		return stage(v1.ReasonProvenanceMissing, err, "the pack has no valid provenance: %s", refusalText(err))
	case errors.Is(err, ocipack.ErrUntrustedSignature), errors.Is(err, ocipack.ErrWrongIdentity), errors.Is(err, ocipack.ErrWrongIssuer),
		errors.Is(err, ocipack.ErrWrongSubjectDigest), errors.Is(err, ocipack.ErrWrongPredicateType), errors.Is(err, ocipack.ErrWrongBuilder),
		errors.Is(err, ocipack.ErrWrongSourceRepository), errors.Is(err, ocipack.ErrWrongSourceRef), errors.Is(err, ocipack.ErrInvalidPolicy),
		errors.Is(err, ocipack.ErrInvalidKey), errors.Is(err, ocipack.ErrUnanchoredSubjectRegExp), errors.Is(err, ocipack.ErrAmbiguousSource),
		errors.Is(err, ocipack.ErrCertificateSource), errors.Is(err, ocipack.ErrPredicateDisagreesWithCertificate), errors.Is(err, ocipack.ErrMissingTransparency):
		return stage(v1.ReasonVerificationFailed, err, "the pack does not satisfy the provenance policy: %s", refusalText(err))
	}
	if _, ok := refusal.As(err); ok {
		return stage(v1.ReasonPackInvalid, err, "the pack is refused: %s", refusalText(err))
	}
	return &controllers.StageError{Condition: v1.ConditionSourceVerified, Reason: v1.ReasonRegistryUnavailable, Transient: true, Err: err,
		Message: "the pack could not be fetched; retrying"}
}

func stage(reason string, err error, format string, args ...any) *controllers.StageError {
	return &controllers.StageError{Condition: v1.ConditionSourceVerified, Reason: reason, Err: err, Message: fmt.Sprintf(format, args...)}
}
