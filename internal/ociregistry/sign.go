package ociregistry

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"github.com/b10x/connector-mcp/ocipack"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

var timeZero time.Time

// Annotations of a bundle referrer manifest (cosign --new-bundle-format).
const (
	// AnnotationBundleContent says what the bundle holds: "dsse-envelope" or "message-signature".
	AnnotationBundleContent = "dev.sigstore.bundle.content"
	// AnnotationBundlePredicateType is the predicate type of the DSSE-wrapped in-toto statement.
	AnnotationBundlePredicateType = "dev.sigstore.bundle.predicateType"
)

// Provenance fills the SLSA provenance v1 statement made by Signer.Sign.
type Provenance struct {
	// BuilderID is runDetails.builder.id, e.g. the CI workflow identity.
	BuilderID string
	// SourceRepository is the source repository URI, e.g. "git+https://github.com/org/repo".
	SourceRepository string
	// SourceRef is the ref the pack was built from, e.g. "refs/heads/main".
	SourceRef string
	// SourceRevision is the commit, recorded as resolvedDependencies[].digest.gitCommit.
	SourceRevision string
	// BuildType is buildDefinition.buildType; default DefaultBuildType.
	BuildType string
}

// DefaultBuildType is the buildType of provenance made by "mcpctl pack sign".
const DefaultBuildType = "https://b10x.io/connector-mcp/pack-sign/v1"

// Signer signs packs: a DSSE-wrapped in-toto statement (predicate https://sigstore.dev/cosign/sign/v1,
// as cosign sign --new-bundle-format makes) and, when provenance is given, an SLSA provenance v1
// attestation, each as a sigstore bundle v0.3 attached as an OCI referrer of the pack.
type Signer struct {
	// Keypair signs. Use NewKeypair for a key from LoadPrivateKey (cosign --key).
	Keypair sign.Keypair
	// CertificateProvider, when set, obtains a certificate for Keypair (keyless, e.g. Fulcio).
	CertificateProvider sign.CertificateProvider
	// CertificateProviderOptions are passed to CertificateProvider (e.g. the OIDC token).
	CertificateProviderOptions *sign.CertificateProviderOptions
	// TimestampAuthorities are RFC 3161 TSAs to timestamp each signature.
	TimestampAuthorities []*sign.TimestampAuthority
	// TransparencyLogs are Rekor instances to log each signature.
	TransparencyLogs []sign.Transparency
	// Timestamp, when set, returns an RFC 3161 signed timestamp over a signature; it is added to
	// the bundle's timestamp verification data (for a TSA reached by other means than
	// TimestampAuthorities).
	Timestamp func(ctx context.Context, signature []byte) ([]byte, error)
}

// Sign attaches a signature bundle and, when prov is not nil, a provenance attestation bundle to
// the pack ref (pinned by digest), and returns the referrer manifests pushed.
func (s *Signer) Sign(ctx context.Context, c *Client, ref Reference, prov *Provenance) ([]ocispec.Descriptor, error) {
	if ref.Digest == "" {
		return nil, refuse(ocipack.RefusalDigestRequired, "", ocipack.ErrDigestRequired)
	}
	type stmt struct {
		predicateType string
		predicate     any
	}
	todo := []stmt{{PredicateCosignSign, map[string]any{}}}
	if prov != nil {
		todo = append(todo, stmt{PredicateSLSAProvenanceV1, ProvenancePredicate(*prov)})
	}
	var out []ocispec.Descriptor
	for _, st := range todo {
		payload, err := Statement(ref, st.predicateType, st.predicate)
		if err != nil {
			return nil, err
		}
		b, err := s.SignStatement(ctx, payload)
		if err != nil {
			return nil, err
		}
		d, err := c.Attach(ctx, ref, b, map[string]string{
			AnnotationBundleContent:       "dsse-envelope",
			AnnotationBundlePredicateType: st.predicateType,
			ocispec.AnnotationCreated:     time.Now().UTC().Format(time.RFC3339),
		})
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// Statement returns an in-toto v1 statement whose subject is the pack ref (name = repository,
// digest = the pack digest).
func Statement(ref Reference, predicateType string, predicate any) ([]byte, error) {
	return json.Marshal(map[string]any{
		"_type": InTotoStatementV1,
		"subject": []map[string]any{{
			"name":   ref.Registry + "/" + ref.Repository,
			"digest": map[string]string{"sha256": strings.TrimPrefix(ref.Digest, "sha256:")},
		}},
		"predicateType": predicateType,
		"predicate":     predicate,
	})
}

// ProvenancePredicate returns an SLSA provenance v1 predicate for p: the source as
// resolvedDependencies[0] "REPO@REF" with digest gitCommit, and as externalParameters.source.
func ProvenancePredicate(p Provenance) map[string]any {
	bt := p.BuildType
	if bt == "" {
		bt = DefaultBuildType
	}
	dep := map[string]any{"uri": p.SourceRepository + "@" + p.SourceRef}
	if p.SourceRevision != "" {
		dep["digest"] = map[string]string{"gitCommit": p.SourceRevision}
	}
	return map[string]any{
		"buildDefinition": map[string]any{
			"buildType": bt,
			"externalParameters": map[string]any{
				"source": map[string]string{"repository": p.SourceRepository, "ref": p.SourceRef},
			},
			"resolvedDependencies": []any{dep},
		},
		"runDetails": map[string]any{
			"builder": map[string]string{"id": p.BuilderID},
		},
	}
}

// SignStatement signs an in-toto statement as a DSSE envelope and returns the sigstore bundle
// v0.3 JSON.
func (s *Signer) SignStatement(ctx context.Context, statement []byte) ([]byte, error) {
	if s.Keypair == nil {
		return nil, refuse(ocipack.RefusalInvalidKey, "", ocipack.ErrInvalidKey)
	}
	pb, err := sign.Bundle(&sign.DSSEData{Data: statement, PayloadType: InTotoPayloadType}, s.Keypair, sign.BundleOptions{
		CertificateProvider:        s.CertificateProvider,
		CertificateProviderOptions: s.CertificateProviderOptions,
		TimestampAuthorities:       s.TimestampAuthorities,
		TransparencyLogs:           s.TransparencyLogs,
		Context:                    ctx,
	})
	if err != nil {
		return nil, err
	}
	if s.Timestamp != nil {
		sig := pb.GetDsseEnvelope().GetSignatures()[0].GetSig()
		ts, err := s.Timestamp(ctx, sig)
		if err != nil {
			return nil, err
		}
		if pb.VerificationMaterial.TimestampVerificationData == nil {
			pb.VerificationMaterial.TimestampVerificationData = &protobundle.TimestampVerificationData{}
		}
		tvd := pb.VerificationMaterial.TimestampVerificationData
		tvd.Rfc3161Timestamps = append(tvd.Rfc3161Timestamps, &protocommon.RFC3161SignedTimestamp{SignedTimestamp: ts})
	}
	b, err := bundle.NewBundle(pb)
	if err != nil {
		return nil, err
	}
	return b.MarshalJSON()
}

// LoadPrivateKey parses a PEM private key: cosign's encrypted format ("ENCRYPTED SIGSTORE PRIVATE
// KEY" or "ENCRYPTED COSIGN PRIVATE KEY", decrypted with password, as COSIGN_PASSWORD), or a plain
// PKCS#8, SEC 1 or PKCS#1 key.
func LoadPrivateKey(pemBytes, password []byte) (crypto.Signer, error) {
	k, err := cryptoutils.UnmarshalPEMToPrivateKey(pemBytes, cryptoutils.StaticPasswordFunc(password))
	if err != nil {
		return nil, refuse(ocipack.RefusalInvalidKey, "", ocipack.ErrInvalidKey)
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, refuse(ocipack.RefusalInvalidKey, "", ocipack.ErrInvalidKey)
	}
	return s, nil
}

// keypair is a sign.Keypair over an existing private key.
type keypair struct {
	priv crypto.Signer
	alg  signature.AlgorithmDetails
	hint []byte
}

// NewKeypair returns a sign.Keypair for priv with sigstore's default algorithm for its key type
// (ECDSA P-256/SHA-256, RSA PKCS#1 v1.5/SHA-256, Ed25519). The hint is base64(sha256(PKIX key)).
func NewKeypair(priv crypto.Signer) (sign.Keypair, error) {
	alg, err := signature.GetDefaultAlgorithmDetails(priv.Public())
	if err != nil {
		return nil, refuse(ocipack.RefusalInvalidKey, "", ocipack.ErrInvalidKey)
	}
	der, err := x509.MarshalPKIXPublicKey(priv.Public())
	if err != nil {
		return nil, refuse(ocipack.RefusalInvalidKey, "", ocipack.ErrInvalidKey)
	}
	sum := sha256.Sum256(der)
	return &keypair{priv: priv, alg: alg, hint: []byte(base64.StdEncoding.EncodeToString(sum[:]))}, nil
}

func (k *keypair) GetHashAlgorithm() protocommon.HashAlgorithm { return k.alg.GetProtoHashType() }
func (k *keypair) GetSigningAlgorithm() protocommon.PublicKeyDetails {
	return k.alg.GetSignatureAlgorithm()
}
func (k *keypair) GetHint() []byte                { return k.hint }
func (k *keypair) GetPublicKey() crypto.PublicKey { return k.priv.Public() }
func (k *keypair) GetKeyAlgorithm() string {
	switch k.alg.GetKeyType() {
	case signature.ECDSA:
		return "ECDSA"
	case signature.RSA:
		return "RSA"
	case signature.ED25519:
		return "ED25519"
	}
	return ""
}
func (k *keypair) GetPublicKeyPem() (string, error) {
	b, err := cryptoutils.MarshalPublicKeyToPEM(k.priv.Public())
	return string(b), err
}
func (k *keypair) SignData(_ context.Context, data []byte) ([]byte, []byte, error) {
	hf := k.alg.GetHashType()
	digest := data
	if hf != crypto.Hash(0) {
		h := hf.New()
		h.Write(data)
		digest = h.Sum(nil)
	}
	var opts crypto.SignerOpts = hf
	if _, ok := k.priv.(ed25519.PrivateKey); ok {
		opts = crypto.Hash(0)
	}
	sig, err := k.priv.Sign(rand.Reader, digest, opts)
	if err != nil {
		return nil, nil, err
	}
	return sig, digest, nil
}
