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
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sigstore/sigstore-go/pkg/sign"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/ociregistry"
	"github.com/b10x/connector-mcp/internal/ocitest"
)

const (
	ciIssuer   = "https://token.actions.example.com"
	ciIdentity = "https://github.com/acme/mcp-profiles/.github/workflows/pack.yml@refs/heads/main"
	ciRepoURI  = "https://github.com/acme/mcp-profiles" // Fulcio's spelling of packRepo
)

// keylessCA is the self-hosted Fulcio CA and TSA (ocitest.KeylessCA) with its trusted_root.json
// on disk for the manager's --trusted-root.
type keylessCA struct {
	*ocitest.KeylessCA
	trustedRoot string
}

func newKeylessCA(t *testing.T) *keylessCA {
	t.Helper()
	k, err := ocitest.NewKeylessCA()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "trusted_root.json")
	if err := os.WriteFile(path, k.TrustedRootJSON, 0o600); err != nil {
		t.Fatal(err)
	}
	return &keylessCA{KeylessCA: k, trustedRoot: path}
}

type staticCertificate []byte

func (c staticCertificate) GetCertificate(context.Context, sign.Keypair, *sign.CertificateProviderOptions) ([]byte, error) {
	return c, nil
}

// signer returns a keyless signer whose certificate certifies the build of ref in ciRepoURI,
// timestamped by the TSA and never logged.
func (k *keylessCA) signer(t *testing.T, ref string) *ociregistry.Signer {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := k.Certificate(&priv.PublicKey, ocitest.CertifiedIdentity{Subject: ciIdentity, Issuer: ciIssuer,
		RepositoryURI: ciRepoURI, Ref: ref, RevisionDigest: packRevision})
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ociregistry.NewKeypair(priv)
	if err != nil {
		t.Fatal(err)
	}
	return &ociregistry.Signer{Keypair: kp, CertificateProvider: staticCertificate(raw),
		Timestamp: func(_ context.Context, sig []byte) ([]byte, error) { return k.Timestamp(sig) }}
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
		{"production: no transparency-log entry", packRef, false, apiv1.ReasonVerificationFailed, "missing_tlog_entry"},
		{"waived: a feature branch claiming main", "refs/heads/feature", true, apiv1.ReasonVerificationFailed, "wrong_certificate_source_ref"},
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
			if _, err := kca.signer(t, r.certifiedRef).Sign(ctx, w.client, ref, &ociregistry.Provenance{
				SourceRepository: packRepo, SourceRef: packRef, SourceRevision: packRevision}); err != nil {
				t.Fatal(err)
			}
			prof := &apiv1.McpServiceProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keyless"},
				Spec: apiv1.McpServiceProfileSpec{Source: apiv1.ProfileSource{OCI: &apiv1.OCISource{Ref: ref.String()}}}}
			mustCreate(t, prof)
			if r.reason != "" {
				prof = waitObj(t, prof, storyTimeout, "refused", func(p *apiv1.McpServiceProfile) bool {
					return hasCondition(p, apiv1.ConditionSourceVerified, metav1.ConditionFalse, r.reason)
				})
				if c := condOf(prof, apiv1.ConditionSourceVerified); !strings.Contains(c.Message, r.refusal) {
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
