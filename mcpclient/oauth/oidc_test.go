package oauth_test

import (
	"errors"
	"testing"

	"github.com/b10x/connector-mcp/internal/oauthtest"
	"github.com/b10x/connector-mcp/mcpclient/oauth"
)

// An authorization server that publishes only OpenID Connect discovery
// (/.well-known/openid-configuration, no RFC 8414 oauth-authorization-server document) is found
// the way the MCP authorization spec orders it (RFC 8414 first, then OIDC discovery: for an
// issuer with a path, path insertion then path appending), and the client authenticates
// through it: the credential is bound to the issuer the OIDC document names.
func TestOIDCDiscoveryOnlyAuthorizationServer(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  oauthtest.Config
	}{
		{"root issuer", oauthtest.Config{OIDCOnly: true}},
		{"issuer with a path (path appending)", oauthtest.Config{OIDCOnly: true, IssuerPath: "/tenant1"}},
		{"RFC 8414 with a path (path insertion)", oauthtest.Config{IssuerPath: "/tenant1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			as := oauthtest.NewAuthServer(t, c.cfg)
			rs := oauthtest.NewResourceServer(t, as)
			store := oauth.NewMemoryStore()
			if err := callTool(t, rs, newHandler(t, rs, store, true), "echo"); err != nil {
				t.Fatalf("authorization through %s: %v", as.Issuer, err)
			}
			cred := onlyCred(t, store, rs.URL)
			if cred.Issuer != as.Issuer || cred.TokenURL != as.Issuer+"/token" {
				t.Fatalf("credential bound to issuer %q, token URL %q; want %q", cred.Issuer, cred.TokenURL, as.Issuer)
			}
			// The metadata document was read (not the 2025-03-26 fallback that guesses endpoints).
			if got := as.Counts(); got.MetadataReads == 0 || got.CodeGrants != 1 || got.Registrations != 1 {
				t.Fatalf("authorization server counts %+v", got)
			}
		})
	}
}

// Must-fail twin: the OIDC-discovered document is enforced like an RFC 8414 one; an authorization
// response naming another issuer than the one it advertises (RFC 9207) is refused.
func TestOIDCDiscoveredIssuerIsEnforced(t *testing.T) {
	as := oauthtest.NewAuthServer(t, oauthtest.Config{OIDCOnly: true, IssuerPath: "/tenant1", WrongIss: true})
	rs := oauthtest.NewResourceServer(t, as)
	store := oauth.NewMemoryStore()
	err := callTool(t, rs, newHandler(t, rs, store, true), "echo")
	var ae *oauth.AuthorizationError
	if !errors.As(err, &ae) || ae.Stage != "issuer_check" {
		t.Fatalf("got %v, want an issuer_check failure", err)
	}
	assertClean(t, err, "attacker.example")
	if c := as.Counts(); c.CodeGrants != 0 || c.MetadataReads == 0 {
		t.Fatalf("counts %+v: the code was exchanged or the document never read", c)
	}
}
