package oauthk8s

import (
	"context"
	"errors"
	"testing"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/mcpclient/oauth"
)

// A grant without a refresh token is refused before anything is written (the client is never
// used: nil here). The twin, a grant with one, is written by the envtest producer story and
// cmd/mcpctl's login --to-secret test.
func TestApplyRefusesGrantWithoutRefreshToken(t *testing.T) {
	cred := &oauth.Credential{Key: oauth.Key{Resource: "https://mcp.example.com/mcp", Issuer: "https://auth.example.com"}, AccessToken: "at"}
	if err := Apply(context.Background(), nil, "ns", "name", cred, apiv1.RegistrationPreregistered, nil); !errors.Is(err, ErrNoRefreshToken) {
		t.Fatalf("got %v, want ErrNoRefreshToken", err)
	}
}
