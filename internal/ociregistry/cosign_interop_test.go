package ociregistry

import (
	"context"
	"os"
	"testing"

	"github.com/b10x/connector-mcp/ocipack"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/ocitest"
)

// TestVerifiesBundlesMadeByRealCosign pins the interoperability check of docs/packs.md: the
// bundles in testdata/cosign were made by cosign v3.1.3 ("cosign sign" and "cosign attest --type
// slsaprovenance1", both --key cosign.key --tlog-upload=false --new-bundle-format) over the pack of
// testdata/cosign/a.yaml. Packs are reproducible, so pushing a.yaml again yields the digest they
// sign; attached as referrers, they verify here, and the must-fail twins still hold.
func TestVerifiesBundlesMadeByRealCosign(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile("testdata/cosign/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	doc, err := ocipack.DecodeProfile(read("a.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ParsePublicKey(read("cosign.pub"))
	if err != nil {
		t.Fatal(err)
	}
	for _, referrers := range []bool{true, false} {
		reg := ocitest.New(ocitest.Options{Referrers: referrers})
		defer reg.Close()
		c := &Client{PlainHTTP: true}
		repo, _ := ParseRepository(reg.Host + "/team/a")
		ref, err := c.Push(context.Background(), repo, []*apiv1.ProfileDocument{doc})
		if err != nil {
			t.Fatal(err)
		}
		if ref.Digest != "sha256:5ae6b20e8984034686a6ca389e7d0ea2ba89ffaad95aeec147a454062858f19f" {
			t.Fatalf("the pack is not reproducible: %s", ref.Digest)
		}
		for _, b := range []struct{ file, predicate string }{
			{"sign.sigstore.json", PredicateCosignSign}, {"provenance.sigstore.json", PredicateSLSAProvenanceV1},
		} {
			if _, err := c.Attach(context.Background(), ref, read(b.file), map[string]string{
				AnnotationBundleContent: "dsse-envelope", AnnotationBundlePredicateType: b.predicate,
			}); err != nil {
				t.Fatal(err)
			}
		}
		policy := Policy{PublicKey: pub, Provenance: &apiv1.ProvenancePolicy{
			BuilderID: "https://ci.acme.example/cosign", SourceRepository: "git+https://github.com/acme/profiles", SourceRef: "refs/heads/main"}}
		res, err := NewVerifier(c, nil).Verify(context.Background(), ref, policy)
		if err != nil {
			t.Fatalf("referrers=%v: %v", referrers, err)
		}
		if res.SourceRevision != "1111111111111111111111111111111111111111" || res.KeyID == "" {
			t.Fatalf("result %+v", res)
		}
		policy.Provenance.SourceRef = "refs/heads/dev"
		_, err = NewVerifier(c, nil).Verify(context.Background(), ref, policy)
		wantRefusal(t, err, "wrong_source_ref", ocipack.ErrWrongSourceRef)
		_, other := keySigner(t)
		policy.PublicKey, policy.Provenance.SourceRef = other, "refs/heads/main"
		_, err = NewVerifier(c, nil).Verify(context.Background(), ref, policy)
		wantRefusal(t, err, "untrusted_signature", ocipack.ErrUntrustedSignature)
	}
}
