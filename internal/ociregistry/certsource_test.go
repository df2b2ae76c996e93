package ociregistry

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"math/big"
	"net/url"
	"testing"
	"time"

	"github.com/b10x/connector-mcp/ocipack"

	"github.com/sigstore/sigstore-go/pkg/fulcio/certificate"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/ocitest"
)

// fulcioWithExtensions is a Fulcio CA that issues leaf certificates carrying the source
// extensions real Fulcio derives from a GitHub Actions OIDC token. It shares the
// VirtualSigstore's TSA and logs: the trusted material is the VirtualSigstore with this CA.
type fulcioWithExtensions struct {
	*ca.VirtualSigstore
	inter    *x509.Certificate
	interKey crypto.Signer
	cas      []root.CertificateAuthority
}

func (f *fulcioWithExtensions) FulcioCertificateAuthorities() []root.CertificateAuthority {
	return f.cas
}

func newFulcioWithExtensions(t testing.TB) *fulcioWithExtensions {
	t.Helper()
	rootCert, rootKey, err := ca.GenerateRootCa()
	if err != nil {
		t.Fatal(err)
	}
	inter, interKey, err := ca.GenerateFulcioIntermediate(rootCert, rootKey)
	if err != nil {
		t.Fatal(err)
	}
	return &fulcioWithExtensions{
		VirtualSigstore: virtualSigstore(t), inter: inter, interKey: interKey,
		cas: []root.CertificateAuthority{&root.FulcioCertificateAuthority{Root: rootCert, Intermediates: []*x509.Certificate{inter}}},
	}
}

// certSource is what the CA certifies about the build.
type certSource struct{ repo, ref, digest string }

// signer issues a certificate for subject/issuer with the source extensions of src (none when
// src is nil) and returns a signer timestamped by the virtual TSA.
func (f *fulcioWithExtensions) signer(t testing.TB, subject string, src *certSource) *Signer {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(subject)
	if err != nil {
		t.Fatal(err)
	}
	der := func(s string) []byte {
		b, err := asn1.MarshalWithParams(s, "utf8")
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ext := []pkix.Extension{{Id: certificate.OIDIssuerV2, Value: der(testIssuer)}}
	if src != nil {
		ext = append(ext,
			pkix.Extension{Id: certificate.OIDSourceRepositoryURI, Value: der(src.repo)},
			pkix.Extension{Id: certificate.OIDSourceRepositoryRef, Value: der(src.ref)},
			pkix.Extension{Id: certificate.OIDSourceRepositoryDigest, Value: der(src.digest)},
			pkix.Extension{Id: certificate.OIDBuildTrigger, Value: der("push")},
			pkix.Extension{Id: certificate.OIDRunnerEnvironment, Value: der("github-hosted")},
		)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), URIs: []*url.URL{u},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(10 * time.Minute),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
		ExtraExtensions: ext,
	}
	raw, err := x509.CreateCertificate(rand.Reader, tmpl, f.inter, &priv.PublicKey, f.interKey)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := NewKeypair(priv)
	if err != nil {
		t.Fatal(err)
	}
	return &Signer{Keypair: kp, CertificateProvider: staticCert(raw),
		Timestamp: func(_ context.Context, sig []byte) ([]byte, error) { return f.TimestampResponse(sig) }}
}

const (
	ghRepo    = "https://github.com/acme/profiles" // Fulcio's spelling of testRepo
	ghFork    = "https://github.com/mallory/profiles"
	ghFeature = "refs/heads/feature-unreviewed"
	otherRev  = "fedcba9876543210fedcba9876543210fedcba98"
)

// githubPredicate is the shape of GitHub's build provenance (actions/attest-build-provenance):
// the primary source in externalParameters.workflow, its commit in resolvedDependencies.
func githubPredicate(repo, ref, rev string, extraDeps ...map[string]any) map[string]any {
	deps := []any{map[string]any{"uri": "git+" + repo + "@" + ref, "digest": map[string]string{"gitCommit": rev}}}
	for _, d := range extraDeps {
		deps = append(deps, d)
	}
	return map[string]any{
		"buildDefinition": map[string]any{
			"buildType":            "https://actions.github.io/buildtypes/workflow/v1",
			"externalParameters":   map[string]any{"workflow": map[string]string{"repository": repo, "ref": ref, "path": ".github/workflows/pack.yml"}},
			"resolvedDependencies": deps,
		},
		"runDetails": map[string]any{"builder": map[string]string{"id": testBuilder}},
	}
}

// attest signs predicate as an SLSA provenance v1 statement over ref and attaches it.
func attest(t *testing.T, c *Client, ref Reference, s *Signer, predicate any) {
	t.Helper()
	ctx := context.Background()
	st, err := Statement(ref, PredicateSLSAProvenanceV1, predicate)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.SignStatement(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Attach(ctx, ref, b, map[string]string{AnnotationBundlePredicateType: PredicateSLSAProvenanceV1}); err != nil {
		t.Fatal(err)
	}
}

// TestVerifyCertifiedSource: the source the CA certified matches the policy and the predicate
// agrees with it: verified, with the certified revision recorded.
func TestVerifyCertifiedSource(t *testing.T) {
	f := newFulcioWithExtensions(t)
	reg := ocitest.New(ocitest.Options{Referrers: true})
	defer reg.Close()
	ref, c := pushed(t, reg, 1)
	attest(t, c, ref, f.signer(t, testIdentity, &certSource{ghRepo, testRef, testRevision}), githubPredicate(ghRepo, testRef, testRevision))
	p := keylessPolicy()
	p.Keyless = &apiv1.KeylessIdentity{Issuer: testIssuer, SubjectRegExp: `^https://github\.com/acme/profiles/\.github/workflows/pack\.yml@refs/heads/main$`}
	res, err := NewVerifier(c, f, WithStrictKeyless()).Verify(context.Background(), ref, p)
	if err != nil {
		t.Fatal(err)
	}
	if res.SourceRepository != testRepo || res.SourceRef != testRef || res.SourceRevision != testRevision || res.Subject != testIdentity {
		t.Fatalf("%+v", res)
	}
}

// TestVerifyCertifiedSourceRefusals are the must-fail twins of TestVerifyCertifiedSource and of
// the primary-source rule, each with its own refusal.
func TestVerifyCertifiedSourceRefusals(t *testing.T) {
	f := newFulcioWithExtensions(t)
	keyS, keyPub := keySigner(t)
	cases := []struct {
		name      string
		signer    *Signer
		predicate map[string]any
		policy    Policy
		opts      []VerifierOption
		refusal   string
		reason    error
	}{
		{"feature branch claiming main (certificate says feature, predicate says main)",
			f.signer(t, testIdentity, &certSource{ghRepo, ghFeature, testRevision}), githubPredicate(ghRepo, testRef, testRevision),
			keylessPolicy(), nil, "wrong_certificate_source_ref", ocipack.ErrCertificateSource},
		{"fork certificate claiming the reviewed repository",
			f.signer(t, testIdentity, &certSource{ghFork, testRef, testRevision}), githubPredicate(ghRepo, testRef, testRevision),
			keylessPolicy(), nil, "wrong_certificate_source_repository", ocipack.ErrCertificateSource},
		{"certificate matches, predicate claims another ref",
			f.signer(t, testIdentity, &certSource{ghRepo, testRef, testRevision}), githubPredicate(ghRepo, ghFeature, testRevision),
			keylessPolicy(), nil, "predicate_disagrees_with_certificate", ocipack.ErrPredicateDisagreesWithCertificate},
		{"certificate matches, predicate claims another revision",
			f.signer(t, testIdentity, &certSource{ghRepo, testRef, testRevision}), githubPredicate(ghRepo, testRef, otherRev),
			keylessPolicy(), nil, "predicate_disagrees_with_certificate", ocipack.ErrPredicateDisagreesWithCertificate},
		{"strict: keyless certificate certifies no source",
			f.signer(t, testIdentity, nil), githubPredicate(ghRepo, testRef, testRevision),
			keylessPolicy(), []VerifierOption{WithStrictKeyless()}, "missing_certificate_source", ocipack.ErrCertificateSource},
		{"fork listing the reviewed repository as a dependency",
			keyS, githubPredicate(ghFork, testRef, testRevision, map[string]any{"uri": testRepo + "@" + testRef, "digest": map[string]string{"gitCommit": testRevision}}),
			Policy{PublicKey: keyPub, Provenance: provenancePolicy()}, nil, "wrong_source_repository", ocipack.ErrWrongSourceRepository},
		{"only a dependency names the reviewed repository",
			keyS, map[string]any{"buildDefinition": map[string]any{"resolvedDependencies": []any{map[string]any{"uri": testRepo + "@" + testRef}}},
				"runDetails": map[string]any{"builder": map[string]string{"id": testBuilder}}},
			Policy{PublicKey: keyPub, Provenance: provenancePolicy()}, nil, "wrong_source_repository", ocipack.ErrWrongSourceRepository},
		{"workflow and source name different primary sources",
			keyS, func() map[string]any {
				p := githubPredicate(ghRepo, testRef, testRevision)
				p["buildDefinition"].(map[string]any)["externalParameters"].(map[string]any)["source"] = map[string]string{"repository": testRepo, "ref": ghFeature}
				return p
			}(),
			Policy{PublicKey: keyPub, Provenance: provenancePolicy()}, nil, "ambiguous_source", ocipack.ErrAmbiguousSource},
		{"unanchored subject regexp under a strict verifier",
			f.signer(t, testIdentity, &certSource{ghRepo, testRef, testRevision}), githubPredicate(ghRepo, testRef, testRevision),
			Policy{Keyless: &apiv1.KeylessIdentity{Issuer: testIssuer, SubjectRegExp: `^https://github\.com/acme/`}, Provenance: provenancePolicy()},
			[]VerifierOption{WithStrictKeyless()}, "unanchored_subject_regexp", ocipack.ErrUnanchoredSubjectRegExp},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reg := ocitest.New(ocitest.Options{Referrers: true})
			defer reg.Close()
			ref, c := pushed(t, reg, 1)
			attest(t, c, ref, tc.signer, tc.predicate)
			_, err := NewVerifier(c, f, tc.opts...).Verify(context.Background(), ref, tc.policy)
			wantRefusal(t, err, tc.refusal, tc.reason)
		})
	}
}

func TestCheckSubjectRegExp(t *testing.T) {
	for expr, want := range map[string]string{
		`^https://github\.com/acme/profiles/\.github/workflows/pack\.yml@refs/heads/main$`: "",
		`^https://github\.com/acme/.*$`:         "",
		`^https://github\.com/acme/`:            "unanchored_subject_regexp",
		`https://github\.com/acme/.*$`:          "unanchored_subject_regexp",
		`^https://github\.com/acme/profiles\$`:  "unanchored_subject_regexp",
		`^https://github\.com/acme/profiles\\$`: "",
		`^(`:                                    "invalid_policy",
		// Anchoring is read from the syntax tree, not the text (issue 21, finding 7).
		`^a|b$`:          "unanchored_subject_regexp", // "^a" or "b$": "a-anything" and "anything-b" match
		`^(a|b)$`:        "",
		`^(?:a|b)$`:      "",
		`^a$|^b$`:        "", // every branch is anchored at both ends
		`^a$|b$`:         "unanchored_subject_regexp",
		`\Aa\z`:          "",
		`\Aa$`:           "",
		`(?m)^a$`:        "unanchored_subject_regexp", // multi-line anchors match at a newline
		`^a(?m)$`:        "unanchored_subject_regexp",
		`^(a)+$`:         "",
		`(^a)*$`:         "unanchored_subject_regexp",
		`^(?:^a|^b)c$`:   "",
		`^a$|`:           "unanchored_subject_regexp", // the empty branch matches anywhere
		`^a$|(?:x|^y$)`:  "unanchored_subject_regexp",
		`^https://x\$|$`: "unanchored_subject_regexp",
	} {
		if got := refusalName(CheckSubjectRegExp(expr)); got != want {
			t.Errorf("%s: got %q, want %q", expr, got, want)
		}
	}
}

// TestVerifyKeylessTransparencyRequirements: a keyless bundle timestamped by a TSA but never
// logged is refused by name when the verifier requires a log entry; a logged bundle without a
// TSA timestamp is refused when it requires one; each passes when it carries what is required.
func TestVerifyKeylessTransparencyRequirements(t *testing.T) {
	ctx := context.Background()
	vs := virtualSigstore(t)
	signTSA := func(t *testing.T) (Reference, *Client) {
		reg := ocitest.New(ocitest.Options{Referrers: true})
		t.Cleanup(reg.Close)
		ref, c := pushed(t, reg, 1)
		if _, err := keylessSigner(t, vs, testIdentity, testIssuer).Sign(ctx, c, ref, testProvenance()); err != nil {
			t.Fatal(err)
		}
		return ref, c
	}
	signTlog := func(t *testing.T) (Reference, *Client) {
		reg := ocitest.New(ocitest.Options{Referrers: true})
		t.Cleanup(reg.Close)
		ref, c := pushed(t, reg, 1)
		cert, priv, err := vs.GenerateLeafCert(testIdentity, testIssuer)
		if err != nil {
			t.Fatal(err)
		}
		kp, err := NewKeypair(priv.(crypto.Signer))
		if err != nil {
			t.Fatal(err)
		}
		s := &Signer{Keypair: kp, CertificateProvider: staticCert(cert.Raw)}
		s.TransparencyLogs = append(s.TransparencyLogs, virtualRekor{vs: vs, cert: cert})
		if _, err := s.Sign(ctx, c, ref, testProvenance()); err != nil {
			t.Fatal(err)
		}
		return ref, c
	}
	t.Run("tlog required, logged bundle passes", func(t *testing.T) {
		ref, c := signTlog(t)
		if _, err := NewVerifier(c, vs, WithKeylessTransparencyLog(1)).Verify(ctx, ref, keylessPolicy()); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("tlog required, TSA-only bundle refused", func(t *testing.T) {
		ref, c := signTSA(t)
		_, err := NewVerifier(c, vs, WithKeylessTransparencyLog(1)).Verify(ctx, ref, keylessPolicy())
		wantRefusal(t, err, "missing_tlog_entry", ocipack.ErrMissingTransparency)
	})
	t.Run("signed timestamp required, TSA bundle passes", func(t *testing.T) {
		ref, c := signTSA(t)
		if _, err := NewVerifier(c, vs, WithKeylessSignedTimestamps(1)).Verify(ctx, ref, keylessPolicy()); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("signed timestamp required, log-only bundle refused", func(t *testing.T) {
		ref, c := signTlog(t)
		_, err := NewVerifier(c, vs, WithKeylessSignedTimestamps(1)).Verify(ctx, ref, keylessPolicy())
		wantRefusal(t, err, "missing_signed_timestamp", ocipack.ErrMissingTransparency)
	})
	t.Run("key-signed packs are not affected", func(t *testing.T) {
		reg := ocitest.New(ocitest.Options{Referrers: true})
		defer reg.Close()
		ref, c := pushed(t, reg, 1)
		s, pub := keySigner(t)
		if _, err := s.Sign(ctx, c, ref, testProvenance()); err != nil {
			t.Fatal(err)
		}
		if _, err := NewVerifier(c, vs, WithKeylessTransparencyLog(1), WithKeylessSignedTimestamps(1)).Verify(ctx, ref, Policy{PublicKey: pub, Provenance: provenancePolicy()}); err != nil {
			t.Fatal(err)
		}
	})
}

// TestVerifyAny: one fetch, the first satisfied policy wins; when none is satisfied the refusal
// is the one that got furthest.
func TestVerifyAny(t *testing.T) {
	ctx := context.Background()
	reg := ocitest.New(ocitest.Options{Referrers: true})
	defer reg.Close()
	ref, c := pushed(t, reg, 1)
	s, pub := keySigner(t)
	if _, err := s.Sign(ctx, c, ref, testProvenance()); err != nil {
		t.Fatal(err)
	}
	_, other := keySigner(t)
	wrongRef := provenancePolicy()
	wrongRef.SourceRef = "refs/heads/release"
	v := NewVerifier(c, nil)
	i, res, err := v.VerifyAny(ctx, ref, []Policy{{PublicKey: other, Provenance: provenancePolicy()}, {PublicKey: pub, Provenance: provenancePolicy()}})
	if err != nil || i != 1 || res.SourceRevision != testRevision {
		t.Fatalf("got %d %+v %v", i, res, err)
	}
	i, _, err = v.VerifyAny(ctx, ref, []Policy{{PublicKey: other, Provenance: provenancePolicy()}, {PublicKey: pub, Provenance: wrongRef}})
	if i != -1 {
		t.Fatalf("index %d for a refusal", i)
	}
	wantRefusal(t, err, "wrong_source_ref", ocipack.ErrWrongSourceRef)
	_, _, err = v.VerifyAny(ctx, ref, []Policy{{PublicKey: other, Provenance: provenancePolicy()}})
	wantRefusal(t, err, "untrusted_signature", ocipack.ErrUntrustedSignature)
	_, _, err = v.VerifyAny(ctx, ref, nil)
	wantRefusal(t, err, "invalid_policy", ocipack.ErrInvalidPolicy)
}
