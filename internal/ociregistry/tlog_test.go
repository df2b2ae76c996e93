package ociregistry

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"testing"
	"time"

	"github.com/b10x/connector-mcp/ocipack"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protorekor "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"github.com/sigstore/sigstore-go/pkg/tlog"

	"github.com/b10x/connector-mcp/internal/ocitest"
)

// virtualRekor is a sign.Transparency that logs DSSE bundles in the VirtualSigstore's Rekor (a
// dsse 0.0.1 entry with a signed entry timestamp), as public-good Sigstore does for keyless
// signatures.
type virtualRekor struct {
	vs   *ca.VirtualSigstore
	cert *x509.Certificate
}

func (r virtualRekor) GetTransparencyLogEntry(_ context.Context, _ []byte, b *protobundle.Bundle) error {
	env := b.GetDsseEnvelope()
	sig := env.GetSignatures()[0].GetSig()
	now := time.Now().Unix()
	entry, err := r.vs.GenerateTlogEntry(r.cert, &dsse.Envelope{
		PayloadType: env.GetPayloadType(),
		Payload:     base64.StdEncoding.EncodeToString(env.GetPayload()),
		Signatures:  []dsse.Signature{{Sig: base64.StdEncoding.EncodeToString(sig)}},
	}, sig, now, true)
	if err != nil {
		return err
	}
	tle := entry.TransparencyLogEntry()
	set, err := r.vs.RekorSignPayload(tlog.RekorPayload{
		Body:           base64.StdEncoding.EncodeToString(tle.GetCanonicalizedBody()),
		IntegratedTime: now,
		LogIndex:       tle.GetLogIndex(),
		LogID:          hex.EncodeToString(tle.GetLogId().GetKeyId()),
	})
	if err != nil {
		return err
	}
	tle.KindVersion = &protorekor.KindVersion{Kind: "dsse", Version: "0.0.1"}
	tle.InclusionPromise = &protorekor.InclusionPromise{SignedEntryTimestamp: set}
	b.VerificationMaterial.TlogEntries = append(b.VerificationMaterial.TlogEntries, tle)
	return nil
}

// TestVerifyKeylessWithTransparencyLog covers the public-good shape: keyless bundles whose
// observer timestamp is a Rekor integrated time (no TSA), verified with WithTransparencyLog.
func TestVerifyKeylessWithTransparencyLog(t *testing.T) {
	reg := ocitest.New(ocitest.Options{Referrers: true})
	defer reg.Close()
	ref, c := pushed(t, reg, 1)
	vs := virtualSigstore(t)
	cert, priv, err := vs.GenerateLeafCert(testIdentity, testIssuer)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := NewKeypair(priv.(crypto.Signer))
	if err != nil {
		t.Fatal(err)
	}
	s := &Signer{Keypair: kp, CertificateProvider: staticCert(cert.Raw), TransparencyLogs: nil}
	s.TransparencyLogs = append(s.TransparencyLogs, virtualRekor{vs: vs, cert: cert})
	ctx := context.Background()
	if _, err := s.Sign(ctx, c, ref, testProvenance()); err != nil {
		t.Fatal(err)
	}
	res, err := NewVerifier(c, vs, WithTransparencyLog(1)).Verify(ctx, ref, keylessPolicy())
	if err != nil {
		t.Fatal(err)
	}
	if res.Subject != testIdentity || res.SourceRevision != testRevision {
		t.Fatalf("%+v", res)
	}

	// Twin: the same signer without the log, under a policy that requires it.
	reg2 := ocitest.New(ocitest.Options{Referrers: true})
	defer reg2.Close()
	ref2, c2 := pushed(t, reg2, 1)
	if _, err := keylessSigner(t, vs, testIdentity, testIssuer).Sign(ctx, c2, ref2, testProvenance()); err != nil {
		t.Fatal(err)
	}
	_, err = NewVerifier(c2, vs, WithTransparencyLog(1)).Verify(ctx, ref2, keylessPolicy())
	wantRefusal(t, err, "untrusted_signature", ocipack.ErrUntrustedSignature)
}
