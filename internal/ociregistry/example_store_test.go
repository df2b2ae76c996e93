package ociregistry_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/ociregistry"
	"github.com/b10x/connector-mcp/internal/ocitest"
	"github.com/b10x/connector-mcp/ocipack"
	"github.com/b10x/connector-mcp/snapshot"
)

// mapStore is a BlobStore in memory (the manager's is internal/packstore, in ConfigMaps).
type mapStore struct {
	mu   sync.Mutex
	recs map[string]*ociregistry.StoredPack
}

func (m *mapStore) Load(_ context.Context, ref ociregistry.Reference) (*ociregistry.StoredPack, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.recs[ref.String()]; ok {
		return r, nil
	}
	return nil, ociregistry.ErrNotStored
}

func (m *mapStore) Save(_ context.Context, rec *ociregistry.StoredPack) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs[rec.Reference.String()] = rec
	return nil
}

// ExampleBlobStore verifies a pack once with a store, then, the registry gone, verifies it again
// with a new verifier (a restarted manager's) from the stored content, offline. A pack that was
// never verified is still an outage: the error names why the store could not stand in.
func ExampleBlobStore() {
	ctx := context.Background()
	reg := ocitest.New(ocitest.Options{Referrers: true})
	snap, _ := snapshot.New("2026-07-28", snapshot.ServerInfo{Name: "issues"}, []json.RawMessage{
		json.RawMessage(`{"name":"list_issues","inputSchema":{"type":"object"}}`),
	})
	doc := ocipack.Draft(snap)
	doc.Operations[0].Effect = apiv1.EffectRead // the review
	push := &ociregistry.Client{PlainHTTP: true}
	repo, _ := ociregistry.ParseRepository(reg.Host + "/team/issues")
	ref, err := push.Push(ctx, repo, []*apiv1.ProfileDocument{doc})
	if err != nil {
		fmt.Println(err)
		return
	}
	priv, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	kp, _ := ociregistry.NewKeypair(priv)
	prov := &ociregistry.Provenance{SourceRepository: "git+https://github.com/acme/profiles", SourceRef: "refs/heads/main"}
	if _, err := (&ociregistry.Signer{Keypair: kp}).Sign(ctx, push, ref, prov); err != nil {
		fmt.Println(err)
		return
	}
	policy := ociregistry.Policy{PublicKey: priv.Public(), Provenance: &apiv1.ProvenancePolicy{
		SourceRepository: "git+https://github.com/acme/profiles", SourceRef: "refs/heads/main"}}

	store := &mapStore{recs: map[string]*ociregistry.StoredPack{}}
	if _, _, err := ociregistry.NewVerifier(&ociregistry.Client{PlainHTTP: true, Store: store}, nil).VerifyAndPull(ctx, ref, policy); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("stored blobs:", len(store.recs[ref.String()].Blobs))

	reg.Close() // the outage
	res, _, err := ociregistry.NewVerifier(&ociregistry.Client{PlainHTTP: true, Store: store}, nil).VerifyAndPull(ctx, ref, policy)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("verified offline:", res.SourceRef)

	never := ref
	never.Repository = "team/never-verified"
	_, _, err = ociregistry.NewVerifier(&ociregistry.Client{PlainHTTP: true, Store: store}, nil).VerifyAndPull(ctx, never, policy)
	var re *ociregistry.RegistryError
	if errors.As(err, &re) {
		fmt.Println("never verified:", re.Unavailable(), re.Stored)
	}
	// Output:
	// stored blobs: 6
	// verified offline: refs/heads/main
	// never verified: true stored_absent
}
