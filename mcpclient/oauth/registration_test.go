package oauth_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/b10x/connector-mcp/internal/oauthtest"
	"github.com/b10x/connector-mcp/mcpclient/oauth"
)

func login(t *testing.T, rs *oauthtest.ResourceServer, opts oauth.Options) (*oauth.Credential, error) {
	t.Helper()
	opts.ServerURL, opts.HTTPClient, opts.Fetcher = rs.URL, devClient(), oauthtest.Fetcher
	if opts.Store == nil {
		opts.Store = oauth.NewMemoryStore()
	}
	if opts.RedirectURL == "" {
		opts.RedirectURL = redirect
	}
	h, err := oauth.NewHandler(opts)
	if err != nil {
		t.Fatal(err)
	}
	return h.Login(context.Background())
}

func TestRegistrationPreference(t *testing.T) {
	as := oauthtest.NewAuthServer(t, oauthtest.Config{
		Preregistered:             map[string]string{"pre-client": "pre-secret"},
		ClientIDMetadataDocuments: true,
	})
	rs := oauthtest.NewResourceServer(t, as)
	const cimd = "https://client.example/mcpctl.json"

	// 1. A pre-registered client id wins over a metadata document URL.
	c, err := login(t, rs, oauth.Options{ClientID: "pre-client", ClientSecret: "pre-secret", ClientMetadataURL: cimd})
	if err != nil || c.ClientID != "pre-client" {
		t.Fatalf("pre-registered: %v, %v", c, err)
	}
	// 2. Then the metadata document, when the server supports it.
	c, err = login(t, rs, oauth.Options{ClientMetadataURL: cimd})
	if err != nil || c.ClientID != cimd {
		t.Fatalf("metadata document: %v, %v", c, err)
	}
	// 3. Dynamic registration last.
	c, err = login(t, rs, oauth.Options{})
	if err != nil || c.ClientID == cimd || c.ClientID == "pre-client" {
		t.Fatalf("dynamic registration: %v, %v", c, err)
	}
	if got := as.Counts(); got.Registrations != 1 || got.CodeGrants != 3 {
		t.Errorf("counts: %+v", got)
	}
	// Must fail: a pre-registered client bound to another issuer.
	_, err = login(t, rs, oauth.Options{ClientID: "pre-client", ClientSecret: "pre-secret", ClientIssuer: "https://other.example"})
	var ae *oauth.AuthorizationError
	if !errors.As(err, &ae) || ae.Stage != "issuer_check" {
		t.Fatalf("pre-registered client of another issuer: got %v", err)
	}
	// Must fail: a wrong client secret is reported by code, without the server's prose.
	_, err = login(t, rs, oauth.Options{ClientID: "pre-client", ClientSecret: "not-the-secret"})
	if !errors.As(err, &ae) || ae.Stage != "token" || ae.Code != "invalid_client" {
		t.Fatalf("wrong client secret: got %v", err)
	}
	assertClean(t, err, "not-the-secret", "pre-secret")
}

func TestRegistrationIsPersistedPerIssuer(t *testing.T) {
	as := oauthtest.NewAuthServer(t, oauthtest.Config{})
	rs := oauthtest.NewResourceServer(t, as)
	store := oauth.NewMemoryStore()
	if _, err := login(t, rs, oauth.Options{Store: store, RedirectURL: "http://127.0.0.1:1111/callback"}); err != nil {
		t.Fatal(err)
	}
	reg, err := store.LoadRegistration(context.Background(), as.Issuer)
	if err != nil || reg.ClientID == "" || reg.ClientSecret == "" {
		t.Fatalf("registration not persisted: %v", err)
	}
	// Another loopback port reuses it (RFC 8252 §7.3) ...
	c, err := login(t, rs, oauth.Options{Store: store, RedirectURL: "http://127.0.0.1:2222/callback"})
	if err != nil || c.ClientID != reg.ClientID {
		t.Fatalf("registration not reused: %v, %v", c, err)
	}
	if got := as.Counts(); got.Registrations != 1 {
		t.Fatalf("registered again: %+v", got)
	}
	// ... a redirect URI on another host does not (twin).
	if _, err := login(t, rs, oauth.Options{Store: store, RedirectURL: "http://localhost:2222/callback"}); err != nil {
		t.Fatal(err)
	}
	if got := as.Counts(); got.Registrations != 2 {
		t.Fatalf("a non-matching redirect reused the registration: %+v", got)
	}
}

func TestCanonicalResource(t *testing.T) {
	for in, want := range map[string]string{
		"HTTPS://MCP.Example.com:443/mcp#frag": "https://mcp.example.com/mcp",
		"http://127.0.0.1:80/mcp":              "http://127.0.0.1/mcp",
		"http://[::1]:8080/x?a=b":              "http://[::1]:8080/x?a=b",
	} {
		if got, err := oauth.CanonicalResource(in); err != nil || got != want {
			t.Errorf("%s: got %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"ftp://h/x", "https://user:pw@h/x", "mcp", "file:///etc/passwd", "https:opaque", "http://:"} {
		if _, err := oauth.CanonicalResource(bad); !errors.Is(err, oauth.ErrInvalidServerURL) {
			t.Errorf("%s: got %v, want ErrInvalidServerURL", bad, err)
		}
	}
}

// The authorization server named by the resource changes between the handler's discovery and
// the SDK's: the flow is stopped before any code is requested, nothing is stored.
func TestIssuerChangeMidFlowIsRefused(t *testing.T) {
	asA := oauthtest.NewAuthServer(t, oauthtest.Config{})
	asB := oauthtest.NewAuthServer(t, oauthtest.Config{})
	rs := oauthtest.NewResourceServer(t, asA)
	rs.MigrateAfterNextMetadata(asB)
	store := oauth.NewMemoryStore()
	_, err := login(t, rs, oauth.Options{Store: store})
	var be *oauth.BindingError
	if !errors.As(err, &be) || be.Refusal() != "oauth_binding_mismatch" {
		t.Fatalf("got %v, want a binding refusal", err)
	}
	if n := asA.Counts().CodeGrants + asB.Counts().CodeGrants; n != 0 {
		t.Fatalf("%d codes exchanged", n)
	}
	if creds, _ := store.List(context.Background(), ""); len(creds) != 0 {
		t.Fatal("a credential was stored")
	}
	// Twin: without the change in the middle, the same login succeeds (with the new issuer).
	if c, err := login(t, rs, oauth.Options{Store: store}); err != nil || c.Issuer != asB.Issuer {
		t.Fatalf("steady state: %v, %v", c, err)
	}
}

// RFC 9207: an authorization response naming another issuer is refused.
func TestMixUpIssIsRefused(t *testing.T) {
	as := oauthtest.NewAuthServer(t, oauthtest.Config{WrongIss: true})
	rs := oauthtest.NewResourceServer(t, as)
	_, err := login(t, rs, oauth.Options{})
	var ae *oauth.AuthorizationError
	if !errors.As(err, &ae) || ae.Stage != "issuer_check" {
		t.Fatalf("got %v, want an issuer_check failure", err)
	}
	assertClean(t, err, "attacker.example")
	if as.Counts().CodeGrants != 0 {
		t.Fatal("the code was exchanged")
	}
}

func TestMessagesDropURLQueries(t *testing.T) {
	e := &oauth.LoginRequiredError{Resource: "https://mcp.example/mcp?api_key=SECRET#frag"}
	c := &oauth.Credential{Key: oauth.Key{Resource: e.Resource, Issuer: "https://as.example/?t=SECRET"}}
	for _, s := range []string{e.Error(), c.String(), c.GoString()} {
		if strings.Contains(s, "SECRET") || !strings.Contains(s, "https://mcp.example/mcp") {
			t.Errorf("message %q", s)
		}
	}
}
