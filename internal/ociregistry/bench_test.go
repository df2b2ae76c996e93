package ociregistry

import (
	"context"
	"testing"

	"github.com/b10x/connector-mcp/ocipack"

	"github.com/b10x/connector-mcp/internal/ocitest"
)

// signedPack pushes a one-profile pack to an in-process registry and signs it keylessly with a
// provenance attestation.
func signedPack(b *testing.B) (*ocitest.Registry, *Client, Reference, *Verifier) {
	b.Helper()
	reg := ocitest.New(ocitest.Options{Referrers: true})
	ref, c := pushed(b, reg, 1)
	vs := virtualSigstore(b)
	if _, err := keylessSigner(b, vs, testIdentity, testIssuer).Sign(context.Background(), c, ref, testProvenance()); err != nil {
		b.Fatal(err)
	}
	return reg, c, ref, NewVerifier(c, vs)
}

// BenchmarkPullAndVerify measures a cold verification (referrers, bundles, sigstore checks) plus
// the pull of the pack (manifest, layer, strict decode, validation) from a loopback registry.
func BenchmarkPullAndVerify(b *testing.B) {
	reg, c, ref, v := signedPack(b)
	defer reg.Close()
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		cold := NewVerifier(c, v.trusted)
		if _, _, err := cold.VerifyAndPull(ctx, ref, keylessPolicy()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyCached measures a repeat verification of the same digest and policy, answered
// from the verifier's cache without any registry request.
func BenchmarkVerifyCached(b *testing.B) {
	reg, _, ref, v := signedPack(b)
	defer reg.Close()
	ctx := context.Background()
	if _, err := v.Verify(ctx, ref, keylessPolicy()); err != nil {
		b.Fatal(err)
	}
	before := reg.Requests()
	b.ResetTimer()
	for b.Loop() {
		if _, err := v.Verify(ctx, ref, keylessPolicy()); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if reg.Requests() != before {
		b.Fatalf("cached verification reached the registry %d times", reg.Requests()-before)
	}
}

// BenchmarkDecodeValidateProfile measures the strict decode and full validation of one layer.
func BenchmarkDecodeValidateProfile(b *testing.B) {
	layer, err := ocipack.EncodeProfile(reviewedProfile(b), ocipack.FormatJSON)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(layer)))
	for b.Loop() {
		d, err := ocipack.DecodeProfile(layer)
		if err != nil {
			b.Fatal(err)
		}
		if err := ocipack.Validate(d); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyAny32 measures a cold verification of a key-signed pack against 32 candidate
// policies (31 other keys first, then the signer's): the bundles are fetched once and each
// candidate is checked against them, as the manager does for a namespace's trust sources.
func BenchmarkVerifyAny32(b *testing.B) {
	reg := ocitest.New(ocitest.Options{Referrers: true})
	defer reg.Close()
	ref, c := pushed(b, reg, 1)
	s, pub := keySigner(b)
	ctx := context.Background()
	if _, err := s.Sign(ctx, c, ref, testProvenance()); err != nil {
		b.Fatal(err)
	}
	var pols []Policy
	for range 31 {
		_, other := keySigner(b)
		pols = append(pols, Policy{PublicKey: other, Provenance: provenancePolicy()})
	}
	pols = append(pols, Policy{PublicKey: pub, Provenance: provenancePolicy()})
	b.ResetTimer()
	for b.Loop() {
		i, _, err := NewVerifier(c, nil, WithCacheSize(0)).VerifyAny(ctx, ref, pols)
		if err != nil || i != 31 {
			b.Fatal(i, err)
		}
	}
}
