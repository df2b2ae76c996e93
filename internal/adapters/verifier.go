package adapters

import (
	"context"
	"crypto"
	"errors"
	"slices"

	"github.com/b10x/connector-mcp/internal/tracing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/activation"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
	"github.com/b10x/connector-mcp/internal/ociregistry"
	"github.com/b10x/connector-mcp/ocipack"
)

// PackVerifier pulls profile packs by digest and verifies them with ocipack under the cluster's
// trust model: the pack must satisfy one trust source that applies to the profile's namespace
// (Platform, or an McpTrustPolicy selecting it) entirely, signer and provenance from the same
// source, and then the profile's own spec.source.oci.verify, which can only add requirements.
type PackVerifier struct {
	// Verifier is the shared verifier (trusted root, (digest, policy) cache) over the
	// registry client used for anonymous pulls.
	Verifier *ociregistry.Verifier
	// NewVerifier builds a verifier for a registry client with credentials from a pull secret.
	// Nil refuses pull secrets.
	NewVerifier func(c *ociregistry.Client) *ociregistry.Verifier
	// Registry is the template registry client (egress HTTP client, limits, plain HTTP for
	// loopback development registries).
	Registry ociregistry.Client
	// Secrets reads pull secrets and public-key Secrets by name. The manager gives it its
	// cached client, whose Secret informer sees only Secrets labelled
	// connectors.b10x.io/credential=true (appoptions.CacheByObject), so an un-opted Secret is never
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

var _ activation.SourceVerifier = (*PackVerifier)(nil)

// VerifyPack verifies and pulls one pack. The pack must hold exactly one profile document
// (ocipack refusal "ambiguous_pack" otherwise).
func (v *PackVerifier) VerifyPack(ctx context.Context, req activation.VerifyRequest) (*activation.VerifiedSource, error) {
	ref, err := ociregistry.ParseDigestReference(req.Ref)
	if err != nil {
		return nil, step(activation.StepPackReference, err)
	}
	sources, _, err := v.trustSources(ctx, req.Namespace)
	if err != nil {
		return nil, step(activation.StepTrustUnavailable, err)
	}
	pols, cands := Candidates(sources, v.SkipProvenanceUnsafe)
	if len(pols) == 0 {
		return nil, step(RefusalNoTrustSource, ErrNoTrustSource)
	}
	// The profile's own policy is checked after a trust source is satisfied; read its key first
	// so that a missing Secret is reported as such.
	var ownKey crypto.PublicKey
	if req.Policy != nil && req.Policy.PublicKey != nil {
		pem, err := v.secretKey(ctx, req.Namespace, publicKeySecret, req.Policy.PublicKey.Name, req.Policy.PublicKey.Key, "")
		if err != nil {
			return nil, err
		}
		if ownKey, err = ociregistry.ParsePublicKey(pem); err != nil {
			return nil, step(activation.StepVerifyPolicy, err)
		}
	}
	if req.Policy != nil && req.Policy.Keyless != nil && req.Policy.Keyless.SubjectRegExp != "" {
		if err := ociregistry.CheckSubjectRegExp(req.Policy.Keyless.SubjectRegExp); err != nil {
			return nil, step(activation.StepVerifyPolicy, err)
		}
	}
	verifier := v.Verifier
	if req.PullSecret != nil {
		if v.NewVerifier == nil {
			return nil, step(activation.StepPullSecretsDisabled, nil)
		}
		// The pull secret is sent to the registry the profile names: it must opt in and name
		// that registry host, like a deployment's credential names its endpoint host.
		cfg, err := v.secretKey(ctx, req.Namespace, pullSecret, req.PullSecret.Name, corev1.DockerConfigJsonKey, "https://"+ref.Registry)
		if err != nil {
			return nil, err
		}
		creds, err := ociregistry.CredentialsFromDockerConfig(cfg)
		if err != nil {
			return nil, step(activation.StepPullSecretFormat, err)
		}
		c := v.Registry
		c.Credentials = creds
		verifier = v.NewVerifier(&c)
	}
	vctx, span := tracing.Tracer().Start(ctx, "verify pack signature and provenance")
	i, res, err := verifier.VerifyAny(vctx, ref, pols)
	if err == nil {
		if extra := ProfilePolicy(req.Policy, ownKey, pols[i]); extra != nil {
			if _, verr := verifier.Verify(vctx, ref, *extra); verr != nil {
				err = step(RefusalProfilePolicy, verr)
			}
		}
	}
	tracing.EndWith(span, err)
	if err != nil {
		return nil, err
	}
	pctx, span := tracing.Tracer().Start(ctx, "pull pack")
	pack, err := verifier.Pull(pctx, ref)
	tracing.EndWith(span, err)
	if err != nil {
		return nil, err
	}
	// The McpServiceProfile names no service within the pack: the pack must hold exactly one.
	doc, snap, err := pack.ProfileSnapshot("")
	if err != nil {
		return nil, err
	}
	pd, err := ocipack.ProfileDigest(doc)
	if err != nil {
		return nil, step(activation.StepProfileDigest, err)
	}
	prov := res.VerifiedProvenance()
	prov.TrustSource, prov.Signer = cands[i].Source, cands[i].Signer
	prov.WaivedChecks = slices.Clone(v.Waived)
	return &activation.VerifiedSource{Document: doc, Snapshot: snap, PackDigest: ref.Digest, ProfileDigest: pd, Provenance: prov}, nil
}

// The Secrets the verifier reads, with the refusal names of their steps.
var (
	pullSecret      = secretKind{word: "pull", refused: activation.StepPullSecretRefused, unavailable: activation.StepPullSecretUnavailable, noKey: activation.StepPullSecretNoKey}
	publicKeySecret = secretKind{word: "public-key", refused: activation.StepPublicKeySecretRefused, unavailable: activation.StepPublicKeySecretUnavailable, noKey: activation.StepPublicKeySecretNoKey}
)

// secretKind names one use of a Secret and its steps' refusal names.
type secretKind struct {
	word                        string
	refused, unavailable, noKey string
}

// secretKey reads key of Secret name in ns under the credential opt-in rule: the Secret must be
// labelled connectors.b10x.io/credential=true and must not be a ServiceAccount token
// (k8sbinding.CheckOptIn); when endpoint is set the value is sent there, so the Secret's
// allowed-hosts annotation must name its host too (k8sbinding.CheckSecret). A missing Secret
// and an unlabelled one are the same refusal: the manager's cache never sees the latter.
// Refusals are step errors of kind (the cause a *k8sbinding.CredentialRefusal), never the
// Secret's data or annotations.
func (v *PackVerifier) secretKey(ctx context.Context, ns string, kind secretKind, name, key, endpoint string) ([]byte, error) {
	ref := egress.CredentialRef{Name: name, Key: key}
	sec, err := k8sbinding.ReadSecret(ctx, v.Secrets, ns, ref)
	if err != nil {
		var refused *k8sbinding.CredentialRefusal
		if errors.As(err, &refused) && refused.Name == k8sbinding.RefusalCredentialNotOptedIn {
			return nil, step(kind.refused, refused)
		}
		// No consent in this namespace (credential_consent_missing) or an apiserver error:
		// transient, retried.
		return nil, step(kind.unavailable, err)
	}
	var val []byte
	if endpoint == "" {
		if err = k8sbinding.CheckOptIn(sec, ref); err == nil {
			val = sec.Data[key]
		}
	} else {
		val, err = k8sbinding.CheckSecret(sec, ref, endpoint)
	}
	var refused *k8sbinding.CredentialRefusal
	if errors.As(err, &refused) {
		return nil, step(kind.refused, refused)
	}
	if err != nil || len(val) == 0 {
		return nil, step(kind.noKey, nil)
	}
	return val, nil
}
