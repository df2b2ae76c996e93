package ociregistry

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"testing"

	"github.com/b10x/connector-mcp/ocipack"

	"github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/ocitest"
)

const (
	testIssuer   = "https://token.actions.example.com"
	testIdentity = "https://github.com/acme/profiles/.github/workflows/pack.yml@refs/heads/main"
	testRepo     = "git+https://github.com/acme/profiles"
	testRef      = "refs/heads/main"
	testBuilder  = "https://github.com/acme/profiles/.github/workflows/pack.yml"
	testRevision = "0123456789abcdef0123456789abcdef01234567"
)

func testProvenance() *Provenance {
	return &Provenance{BuilderID: testBuilder, SourceRepository: testRepo, SourceRef: testRef, SourceRevision: testRevision}
}

func provenancePolicy() *apiv1.ProvenancePolicy {
	return &apiv1.ProvenancePolicy{BuilderID: testBuilder, SourceRepository: testRepo, SourceRef: testRef}
}

// staticCert is a sign.CertificateProvider returning a certificate issued beforehand (by the
// VirtualSigstore's Fulcio CA) for the keypair.
type staticCert []byte

func (c staticCert) GetCertificate(context.Context, sign.Keypair, *sign.CertificateProviderOptions) ([]byte, error) {
	return c, nil
}

// keylessSigner returns a signer whose certificate the virtual Fulcio issued to identity/issuer,
// timestamped by the virtual TSA.
func keylessSigner(t testing.TB, vs *ca.VirtualSigstore, identity, issuer string) *Signer {
	t.Helper()
	cert, priv, err := vs.GenerateLeafCert(identity, issuer)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := NewKeypair(priv.(crypto.Signer))
	if err != nil {
		t.Fatal(err)
	}
	return &Signer{
		Keypair:             kp,
		CertificateProvider: staticCert(cert.Raw),
		Timestamp:           func(_ context.Context, sig []byte) ([]byte, error) { return vs.TimestampResponse(sig) },
	}
}

func keySigner(t testing.TB) (*Signer, crypto.PublicKey) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := NewKeypair(priv)
	if err != nil {
		t.Fatal(err)
	}
	return &Signer{Keypair: kp}, priv.Public()
}

func virtualSigstore(t testing.TB) *ca.VirtualSigstore {
	t.Helper()
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

func keylessPolicy() Policy {
	return Policy{Keyless: &apiv1.KeylessIdentity{Issuer: testIssuer, Subject: testIdentity}, Provenance: provenancePolicy()}
}

func TestVerifyKeyless(t *testing.T) {
	for _, referrers := range []bool{true, false} {
		t.Run(fmt.Sprintf("referrers=%v", referrers), func(t *testing.T) {
			reg := ocitest.New(ocitest.Options{Referrers: referrers})
			defer reg.Close()
			ref, c := pushed(t, reg, 1)
			vs := virtualSigstore(t)
			ctx := context.Background()
			if _, err := keylessSigner(t, vs, testIdentity, testIssuer).Sign(ctx, c, ref, testProvenance()); err != nil {
				t.Fatal(err)
			}
			v := NewVerifier(c, vs)
			res, err := v.Verify(ctx, ref, keylessPolicy())
			if err != nil {
				t.Fatal(err)
			}
			want := apiv1.VerifiedProvenance{Issuer: testIssuer, Subject: testIdentity, BuilderID: testBuilder,
				SourceRepository: testRepo, SourceRef: testRef, SourceRevision: testRevision}
			if got := res.VerifiedProvenance(); !reflect.DeepEqual(got, want) {
				t.Fatalf("got %+v\nwant %+v", got, want)
			}
			regexpPolicy := keylessPolicy()
			regexpPolicy.Keyless = &apiv1.KeylessIdentity{Issuer: testIssuer, SubjectRegExp: `^https://github\.com/acme/profiles/`}
			if _, err := v.Verify(ctx, ref, regexpPolicy); err != nil {
				t.Fatalf("subject regexp: %v", err)
			}
		})
	}
}

func TestVerifyPublicKey(t *testing.T) {
	reg := ocitest.New(ocitest.Options{Referrers: true})
	defer reg.Close()
	ref, c := pushed(t, reg, 1)
	s, pub := keySigner(t)
	ctx := context.Background()
	if _, err := s.Sign(ctx, c, ref, testProvenance()); err != nil {
		t.Fatal(err)
	}
	res, err := NewVerifier(c, nil).Verify(ctx, ref, Policy{PublicKey: pub, Provenance: provenancePolicy()})
	if err != nil {
		t.Fatal(err)
	}
	if res.KeyID == "" || res.SourceRevision != testRevision || res.Issuer != "" {
		t.Fatalf("result %+v", res)
	}
	_, other := keySigner(t)
	_, err = NewVerifier(c, nil).Verify(ctx, ref, Policy{PublicKey: other, Provenance: provenancePolicy()})
	wantRefusal(t, err, "untrusted_signature", ocipack.ErrUntrustedSignature)
}

func TestVerifyRefusals(t *testing.T) {
	ctx := context.Background()
	vs := virtualSigstore(t)
	type fixture struct {
		reg *ocitest.Registry
		c   *Client
		ref Reference
	}
	setup := func(t *testing.T) fixture {
		reg := ocitest.New(ocitest.Options{Referrers: true})
		t.Cleanup(reg.Close)
		ref, c := pushed(t, reg, 1)
		return fixture{reg, c, ref}
	}
	signed := func(t *testing.T, prov *Provenance) fixture {
		f := setup(t)
		if _, err := keylessSigner(t, vs, testIdentity, testIssuer).Sign(ctx, f.c, f.ref, prov); err != nil {
			t.Fatal(err)
		}
		return f
	}
	cases := []struct {
		name    string
		arrange func(t *testing.T) (fixture, *Verifier, Policy)
		refusal string
		reason  error
	}{
		{"no bundle at all", func(t *testing.T) (fixture, *Verifier, Policy) {
			f := setup(t)
			return f, NewVerifier(f.c, vs), keylessPolicy()
		}, "missing_signature", ocipack.ErrNoSignature},
		{"wrong identity", func(t *testing.T) (fixture, *Verifier, Policy) {
			f := setup(t)
			if _, err := keylessSigner(t, vs, "https://github.com/mallory/fork/.github/workflows/pack.yml@refs/heads/main", testIssuer).Sign(ctx, f.c, f.ref, testProvenance()); err != nil {
				t.Fatal(err)
			}
			return f, NewVerifier(f.c, vs), keylessPolicy()
		}, "wrong_identity", ocipack.ErrWrongIdentity},
		{"wrong identity by regexp", func(t *testing.T) (fixture, *Verifier, Policy) {
			f := signed(t, testProvenance())
			p := keylessPolicy()
			p.Keyless = &apiv1.KeylessIdentity{Issuer: testIssuer, SubjectRegExp: `^https://github\.com/other/`}
			return f, NewVerifier(f.c, vs), p
		}, "wrong_identity", ocipack.ErrWrongIdentity},
		{"wrong issuer", func(t *testing.T) (fixture, *Verifier, Policy) {
			f := setup(t)
			if _, err := keylessSigner(t, vs, testIdentity, "https://accounts.example.org").Sign(ctx, f.c, f.ref, testProvenance()); err != nil {
				t.Fatal(err)
			}
			return f, NewVerifier(f.c, vs), keylessPolicy()
		}, "wrong_issuer", ocipack.ErrWrongIssuer},
		{"untrusted root", func(t *testing.T) (fixture, *Verifier, Policy) {
			f := signed(t, testProvenance())
			return f, NewVerifier(f.c, virtualSigstore(t)), keylessPolicy()
		}, "untrusted_signature", ocipack.ErrUntrustedSignature},
		{"signature over another digest", func(t *testing.T) (fixture, *Verifier, Policy) {
			f := setup(t)
			other := f.ref
			other.Digest = "sha256:" + fmt.Sprintf("%064x", 42)
			s := keylessSigner(t, vs, testIdentity, testIssuer)
			for _, pt := range []string{PredicateCosignSign, PredicateSLSAProvenanceV1} {
				var pred any = map[string]any{}
				if pt == PredicateSLSAProvenanceV1 {
					pred = ProvenancePredicate(*testProvenance())
				}
				st, _ := Statement(other, pt, pred)
				b, err := s.SignStatement(ctx, st)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.c.Attach(ctx, f.ref, b, map[string]string{AnnotationBundlePredicateType: pt}); err != nil {
					t.Fatal(err)
				}
			}
			return f, NewVerifier(f.c, vs), keylessPolicy()
		}, "wrong_subject_digest", ocipack.ErrWrongSubjectDigest},
		{"missing attestation", func(t *testing.T) (fixture, *Verifier, Policy) {
			f := signed(t, nil)
			return f, NewVerifier(f.c, vs), keylessPolicy()
		}, "missing_attestation", ocipack.ErrNoAttestation},
		{"wrong predicate type", func(t *testing.T) (fixture, *Verifier, Policy) {
			f := signed(t, nil)
			st, _ := Statement(f.ref, "https://slsa.dev/provenance/v0.2", map[string]any{"builder": map[string]string{"id": testBuilder}})
			b, err := keylessSigner(t, vs, testIdentity, testIssuer).SignStatement(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.c.Attach(ctx, f.ref, b, nil); err != nil {
				t.Fatal(err)
			}
			return f, NewVerifier(f.c, vs), keylessPolicy()
		}, "wrong_predicate_type", ocipack.ErrWrongPredicateType},
		{"wrong builder", func(t *testing.T) (fixture, *Verifier, Policy) {
			p := testProvenance()
			p.BuilderID = "https://ci.example.com/laptop"
			f := signed(t, p)
			return f, NewVerifier(f.c, vs), keylessPolicy()
		}, "wrong_builder", ocipack.ErrWrongBuilder},
		{"wrong source ref", func(t *testing.T) (fixture, *Verifier, Policy) {
			p := testProvenance()
			p.SourceRef = "refs/heads/feature-unreviewed"
			f := signed(t, p)
			return f, NewVerifier(f.c, vs), keylessPolicy()
		}, "wrong_source_ref", ocipack.ErrWrongSourceRef},
		{"wrong source repository", func(t *testing.T) (fixture, *Verifier, Policy) {
			p := testProvenance()
			p.SourceRepository = "git+https://github.com/mallory/profiles"
			f := signed(t, p)
			return f, NewVerifier(f.c, vs), keylessPolicy()
		}, "wrong_source_repository", ocipack.ErrWrongSourceRepository},
		{"incomplete policy", func(t *testing.T) (fixture, *Verifier, Policy) {
			f := signed(t, testProvenance())
			p := keylessPolicy()
			p.Provenance = nil
			return f, NewVerifier(f.c, vs), p
		}, "invalid_policy", ocipack.ErrInvalidPolicy},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, v, p := tc.arrange(t)
			_, err := v.Verify(ctx, f.ref, p)
			wantRefusal(t, err, tc.refusal, tc.reason)
		})
	}
}

func TestVerifySkipProvenanceUnsafe(t *testing.T) {
	reg := ocitest.New(ocitest.Options{Referrers: true})
	defer reg.Close()
	ref, c := pushed(t, reg, 1)
	vs := virtualSigstore(t)
	ctx := context.Background()
	if _, err := keylessSigner(t, vs, testIdentity, testIssuer).Sign(ctx, c, ref, nil); err != nil {
		t.Fatal(err)
	}
	p := keylessPolicy()
	p.Provenance, p.SkipProvenanceUnsafe = nil, true
	res, err := NewVerifier(c, vs).Verify(ctx, ref, p)
	if err != nil || res.Subject != testIdentity || res.SourceRef != "" {
		t.Fatalf("%+v %v", res, err)
	}
}

func TestVerifyCacheMakesNoRegistryRequest(t *testing.T) {
	reg := ocitest.New(ocitest.Options{Referrers: true})
	defer reg.Close()
	ref, c := pushed(t, reg, 1)
	vs := virtualSigstore(t)
	ctx := context.Background()
	if _, err := keylessSigner(t, vs, testIdentity, testIssuer).Sign(ctx, c, ref, testProvenance()); err != nil {
		t.Fatal(err)
	}
	v := NewVerifier(c, vs)
	first, err := v.Verify(ctx, ref, keylessPolicy())
	if err != nil {
		t.Fatal(err)
	}
	before := reg.Requests()
	second, err := v.Verify(ctx, ref, keylessPolicy())
	if err != nil || *second != *first {
		t.Fatalf("cached result differs: %+v %v", second, err)
	}
	if reg.Requests() != before {
		t.Fatalf("cached verification made %d registry requests", reg.Requests()-before)
	}
	// A different policy is a different cache key: it is evaluated, and refused.
	p := keylessPolicy()
	p.Provenance.SourceRef = "refs/heads/release"
	_, err = v.Verify(ctx, ref, p)
	wantRefusal(t, err, "wrong_source_ref", ocipack.ErrWrongSourceRef)
	if reg.Requests() == before {
		t.Fatal("a different policy must not be answered from the cache")
	}
}

func TestVerifyTamperedAttestationIsNoEvidence(t *testing.T) {
	reg := ocitest.New(ocitest.Options{Referrers: true})
	defer reg.Close()
	ref, c := pushed(t, reg, 1)
	vs := virtualSigstore(t)
	ctx := context.Background()
	if _, err := keylessSigner(t, vs, testIdentity, testIssuer).Sign(ctx, c, ref, testProvenance()); err != nil {
		t.Fatal(err)
	}
	refs, err := c.Bundles(ctx, ref)
	if err != nil || len(refs) != 2 {
		t.Fatalf("bundles: %d %v", len(refs), err)
	}
	for _, r := range refs {
		if r.Descriptor.Annotations[AnnotationBundlePredicateType] == PredicateSLSAProvenanceV1 {
			sum := sha256.Sum256(r.Bundle)
			reg.Tamper("sha256:"+hex.EncodeToString(sum[:]), bytes.Replace(r.Bundle, []byte(`"mediaType"`), []byte(`"mediaTypo"`), 1))
		}
	}
	_, err = NewVerifier(c, vs).Verify(ctx, ref, keylessPolicy())
	wantRefusal(t, err, "missing_attestation", ocipack.ErrNoAttestation)
}

func TestPolicyFromAPI(t *testing.T) {
	s, pub := keySigner(t)
	pemBytes, err := s.Keypair.GetPublicKeyPem()
	if err != nil {
		t.Fatal(err)
	}
	keyRef := &apiv1.SecretKeyReference{Name: "pack-key", Key: "cosign.pub"}
	p, err := PolicyFromAPI(&apiv1.VerifyPolicy{PublicKey: keyRef, Provenance: provenancePolicy()}, []byte(pemBytes))
	if err != nil || p.PublicKey == nil || p.fingerprint() != (Policy{PublicKey: pub, Provenance: provenancePolicy()}).fingerprint() {
		t.Fatalf("%+v %v", p, err)
	}
	for name, c := range map[string]struct {
		in      *apiv1.VerifyPolicy
		pem     string
		refusal string
	}{
		"nil policy":       {nil, "", "invalid_policy"},
		"no identity":      {&apiv1.VerifyPolicy{Provenance: provenancePolicy()}, "", "invalid_policy"},
		"both identities":  {&apiv1.VerifyPolicy{PublicKey: keyRef, Keyless: keylessPolicy().Keyless, Provenance: provenancePolicy()}, pemBytes, "invalid_policy"},
		"no provenance":    {&apiv1.VerifyPolicy{Keyless: keylessPolicy().Keyless}, "", "invalid_policy"},
		"bad regexp":       {&apiv1.VerifyPolicy{Keyless: &apiv1.KeylessIdentity{Issuer: testIssuer, SubjectRegExp: "("}, Provenance: provenancePolicy()}, "", "invalid_policy"},
		"not a public key": {&apiv1.VerifyPolicy{PublicKey: keyRef, Provenance: provenancePolicy()}, "-----BEGIN NOTHING-----\n-----END NOTHING-----\n", "invalid_key"},
	} {
		if _, err := PolicyFromAPI(c.in, []byte(c.pem)); refusalName(err) != c.refusal {
			t.Errorf("%s: got %v, want %s", name, err, c.refusal)
		}
	}
}
