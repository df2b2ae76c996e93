package ociregistry_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/ociregistry"
	"github.com/b10x/connector-mcp/internal/ocitest"
	"github.com/b10x/connector-mcp/ocipack"
	"github.com/b10x/connector-mcp/snapshot"
)

// Example drafts a profile from a snapshot, reviews it, pushes it as a pack, signs it with a key
// and a provenance attestation, then verifies the merge policy and pulls it by digest.
func Example() {
	ctx := context.Background()
	reg := ocitest.New(ocitest.Options{Referrers: true}) // an in-process registry on loopback
	defer reg.Close()

	snap, _ := snapshot.New("2026-07-28", snapshot.ServerInfo{Name: "issues"}, []json.RawMessage{
		json.RawMessage(`{"name":"list_issues","inputSchema":{"type":"object"}}`),
	})
	doc := ocipack.Draft(snap)
	fmt.Println("draft:", ocipack.Validate(doc))
	doc.Operations[0].Effect = apiv1.EffectRead // the review

	client := &ociregistry.Client{PlainHTTP: true}
	repo, _ := ociregistry.ParseRepository(reg.Host + "/team/issues")
	ref, err := client.Push(ctx, repo, []*apiv1.ProfileDocument{doc})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("pinned:", strings.HasPrefix(ref.Digest, "sha256:"))

	priv, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	kp, _ := ociregistry.NewKeypair(priv)
	prov := &ociregistry.Provenance{SourceRepository: "git+https://github.com/acme/profiles", SourceRef: "refs/heads/main", SourceRevision: "4f2a9c1"}
	if _, err := (&ociregistry.Signer{Keypair: kp}).Sign(ctx, client, ref, prov); err != nil {
		fmt.Println(err)
		return
	}

	policy := ociregistry.Policy{PublicKey: priv.Public(), Provenance: &apiv1.ProvenancePolicy{
		SourceRepository: "git+https://github.com/acme/profiles", SourceRef: "refs/heads/main"}}
	res, pack, err := ociregistry.NewVerifier(client, nil).VerifyAndPull(ctx, ref, policy)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("built from:", res.SourceRef, "at", res.SourceRevision)
	fmt.Println("operations:", pack.Profiles[0].Operations[0].OperationRef, pack.Profiles[0].Operations[0].Effect)

	policy.Provenance.SourceRef = "refs/heads/release"
	_, err = ociregistry.NewVerifier(client, nil).Verify(ctx, ref, policy)
	var refusal *ocipack.RefusalError
	if errors.As(err, &refusal) {
		fmt.Println("other branch:", refusal.Refusal())
	}
	// Output:
	// draft: ocipack: unreviewed at operations[0].effect: operation effect not reviewed
	// pinned: true
	// built from: refs/heads/main at 4f2a9c1
	// operations: list_issues read
	// other branch: wrong_source_ref
}

// ExampleDecodeProfile shows a strict decode refusing an unknown field, naming its JSON path.
func ExampleDecodeProfile() {
	_, err := ocipack.DecodeProfile([]byte(`{"contract":"b10x.connector-mcp-service.v1","operations":[{"remoteName":"x","risk":"low"}]}`))
	var refusal *ocipack.RefusalError
	if errors.As(err, &refusal) {
		fmt.Println(refusal.Refusal(), "at", refusal.Path)
	}
	// Output:
	// unknown_field at operations[0].risk
}

// ExampleParseDigestReference shows that a tag is never accepted where a digest is required.
func ExampleParseDigestReference() {
	_, err := ociregistry.ParseDigestReference("registry.example.com/team/github:v1")
	fmt.Println(err)
	ref, _ := ociregistry.ParseDigestReference("registry.example.com/team/github@sha256:" + strings.Repeat("ab", 32))
	fmt.Println(ref.Repository)
	// Output:
	// ocipack: digest_required: reference must pin a sha256 digest
	// team/github
}
