package envtest

// User story of keyless trust through the real manager (issue 10, findings 2 and 9): the platform
// trusts a CI workflow identity from a self-hosted trusted_root.json. The merge verification
// starts from what the Fulcio certificate certified (source repository and ref extensions), and a
// keyless pack needs a transparency-log entry unless an unsafe flag waives it, which the profile
// then says.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sigstore/sigstore-go/pkg/fulcio/certificate"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/controllers"
	"github.com/b10x/connector-mcp/ocipack"
)

const (
	ciIssuer   = "https://token.actions.example.com"
	ciIdentity = "https://github.com/acme/mcp-profiles/.github/workflows/pack.yml@refs/heads/main"
	ciRepoURI  = "https://github.com/acme/mcp-profiles" // Fulcio's spelling of packRepo
)

// keylessCA is a self-hosted Fulcio CA issuing certificates with GitHub-style source extensions,
// and the VirtualSigstore's TSA; trustedRoot is their trusted_root.json.
type keylessCA struct {
	vs          *ca.VirtualSigstore
	inter       *x509.Certificate
	interKey    *ecdsa.PrivateKey
	trustedRoot string
}

func newKeylessCA(t *testing.T) *keylessCA {
	t.Helper()
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatal(err)
	}
	rootCert, rootKey, err := ca.GenerateRootCa()
	if err != nil {
		t.Fatal(err)
	}
	inter, interKey, err := ca.GenerateFulcioIntermediate(rootCert, rootKey)
	if err != nil {
		t.Fatal(err)
	}
	fulcio := &root.FulcioCertificateAuthority{Root: rootCert, Intermediates: []*x509.Certificate{inter},
		ValidityPeriodStart: time.Now().Add(-time.Hour), URI: "https://fulcio.example"}
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01, []root.CertificateAuthority{fulcio}, nil, vs.TimestampingAuthorities(), nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := tr.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "trusted_root.json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return &keylessCA{vs: vs, inter: inter, interKey: interKey, trustedRoot: path}
}

type staticCertificate []byte

func (c staticCertificate) GetCertificate(context.Context, sign.Keypair, *sign.CertificateProviderOptions) ([]byte, error) {
	return c, nil
}

// signer returns a keyless signer whose certificate certifies the build of ref in ciRepoURI,
// timestamped by the TSA and never logged.
func (k *keylessCA) signer(t *testing.T, ref string) *ocipack.Signer {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
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
	san, _ := url.Parse(ciIdentity)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), URIs: []*url.URL{san},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(10 * time.Minute),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
		ExtraExtensions: []pkix.Extension{
			{Id: certificate.OIDIssuerV2, Value: der(ciIssuer)},
			{Id: certificate.OIDSourceRepositoryURI, Value: der(ciRepoURI)},
			{Id: certificate.OIDSourceRepositoryRef, Value: der(ref)},
			{Id: certificate.OIDSourceRepositoryDigest, Value: der(packRevision)},
		}}
	raw, err := x509.CreateCertificate(rand.Reader, tmpl, k.inter, &priv.PublicKey, k.interKey)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ocipack.NewKeypair(priv)
	if err != nil {
		t.Fatal(err)
	}
	return &ocipack.Signer{Keypair: kp, CertificateProvider: staticCertificate(raw),
		Timestamp: func(_ context.Context, sig []byte) ([]byte, error) { return k.vs.TimestampResponse(sig) }}
}

func TestStoryKeylessTrust(t *testing.T) {
	ctx := context.Background()
	kca := newKeylessCA(t)
	type run struct {
		name         string
		certifiedRef string // the ref the certificate certifies; the predicate always claims main
		withoutTlog  bool
		reason       string
		refusal      string
	}
	for _, r := range []run{
		{"production: no transparency-log entry", packRef, false, controllers.ReasonVerificationFailed, "missing_tlog_entry"},
		{"waived: a feature branch claiming main", "refs/heads/feature", true, controllers.ReasonVerificationFailed, "wrong_certificate_source_ref"},
		{"waived: certified main", packRef, true, "", ""},
	} {
		t.Run(r.name, func(t *testing.T) {
			ns := newNamespace(t, "story-keyless")
			w := newPackWorld(t, ns)
			o := devOptions()
			o.SkipProvenanceUnsafe = false
			o.TrustedRootPath = kca.trustedRoot
			o.DefaultIssuer, o.DefaultSubjectRegExp = ciIssuer, `^https://github\.com/acme/mcp-profiles/\.github/workflows/pack\.yml@refs/heads/main$`
			o.DefaultSourceRepository, o.DefaultSourceRef = packRepo, packRef
			o.KeylessWithoutTlogUnsafe = r.withoutTlog
			startOperator(t, ns, o)
			ref := w.push(t, "team/keyless")
			if _, err := kca.signer(t, r.certifiedRef).Sign(ctx, w.client, ref, &ocipack.Provenance{
				SourceRepository: packRepo, SourceRef: packRef, SourceRevision: packRevision}); err != nil {
				t.Fatal(err)
			}
			prof := &apiv1.McpServiceProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keyless"},
				Spec: apiv1.McpServiceProfileSpec{Source: apiv1.ProfileSource{OCI: &apiv1.OCISource{Ref: ref.String()}}}}
			mustCreate(t, prof)
			if r.reason != "" {
				prof = waitObj(t, prof, storyTimeout, "refused", func(p *apiv1.McpServiceProfile) bool {
					return hasCondition(p, controllers.TypeSourceVerified, metav1.ConditionFalse, r.reason)
				})
				if c := condOf(prof, controllers.TypeSourceVerified); !strings.Contains(c.Message, r.refusal) {
					t.Fatalf("SourceVerified %q, want %s", c.Message, r.refusal)
				}
				return
			}
			prof = waitObj(t, prof, storyTimeout, "Ready", isReady[*apiv1.McpServiceProfile])
			v := prof.Status.Verified
			if v == nil || v.TrustSource != "platform" || v.Signer != "default-keyless" || v.Issuer != ciIssuer || v.Subject != ciIdentity ||
				v.SourceRevision != packRevision || strings.Join(v.WaivedChecks, ",") != "keyless_tlog" {
				t.Fatalf("verified %+v", v)
			}
		})
	}
}
