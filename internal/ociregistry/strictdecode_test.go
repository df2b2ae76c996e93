package ociregistry

import (
	"context"
	"testing"

	"github.com/b10x/connector-mcp/ocipack"

	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/b10x/connector-mcp/internal/ocitest"
)

// TestProvenancePredicateIsDecodedExactCase: the signed SLSA predicate is decoded with exact
// member names. encoding/json would merge a "BuildDefinition" member into buildDefinition, so
// one signed predicate could name a harmless source to case-sensitive readers (the SLSA
// verifier, a human, jq) and the reviewed repository to this check. The twin with the source
// only under the exact name verifies.
func TestProvenancePredicateIsDecodedExactCase(t *testing.T) {
	keyS, keyPub := keySigner(t)
	honest := githubPredicate(ghRepo, testRef, testRevision)
	caseVariant := map[string]any{
		"buildDefinition": map[string]any{"buildType": "https://example.com/unreviewed/v1"},
		"BuildDefinition": honest["buildDefinition"],
		"runDetails":      honest["runDetails"],
	}
	for _, tc := range []struct {
		name      string
		predicate map[string]any
		refusal   string
	}{
		{"the source under buildDefinition verifies", honest, ""},
		{"the source only under BuildDefinition is not read", caseVariant, "wrong_source_repository"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := ocitest.New(ocitest.Options{Referrers: true})
			defer reg.Close()
			ref, c := pushed(t, reg, 1)
			attest(t, c, ref, keyS, tc.predicate)
			res, err := NewVerifier(c, nil).Verify(context.Background(), ref, Policy{PublicKey: keyPub, Provenance: provenancePolicy()})
			if tc.refusal == "" {
				if err != nil || res.SourceRepository != testRepo {
					t.Fatalf("%+v %v", res, err)
				}
				return
			}
			wantRefusal(t, err, tc.refusal, ocipack.ErrWrongSourceRepository)
		})
	}
}

// TestDockerConfigIsDecodedExactCase: a Docker config's "auths" is read by its exact name; a
// case variant ("Auths") names no credentials and a duplicated "auths" is refused.
func TestDockerConfigIsDecodedExactCase(t *testing.T) {
	ctx := context.Background()
	creds, err := CredentialsFromDockerConfig([]byte(`{"auths":{"registry.example.com":{"username":"u","password":"p"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := creds(ctx, "registry.example.com"); c.Username != "u" || c.Password != "p" {
		t.Fatalf("exact name: %+v", c)
	}
	creds, err = CredentialsFromDockerConfig([]byte(`{"Auths":{"registry.example.com":{"username":"u","password":"p"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := creds(ctx, "registry.example.com"); c != auth.EmptyCredential {
		t.Fatalf("a case variant of auths was read: %+v", c)
	}
	_, err = CredentialsFromDockerConfig([]byte(`{"auths":{"registry.example.com":{"username":"u"}},"auths":{"registry.example.com":{"username":"v"}}}`))
	wantRefusal(t, err, "invalid_docker_config", ocipack.ErrInvalidDockerConfig)
}
