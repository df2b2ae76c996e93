package oauth_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"

	"github.com/b10x/connector-mcp/internal/oauthtest"
	"github.com/b10x/connector-mcp/mcpclient/oauth"
)

// loggedIn returns a credential obtained interactively (the test browser) for rs.
func loggedIn(t *testing.T, rs *oauthtest.ResourceServer) *oauth.Credential {
	t.Helper()
	h := newHandler(t, rs, oauth.NewMemoryStore(), true)
	c, err := h.Login(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestDiscoverBindingAndRefreshRotates(t *testing.T) {
	as := oauthtest.NewAuthServer(t, oauthtest.Config{})
	rs := oauthtest.NewResourceServer(t, as)
	cred := loggedIn(t, rs)
	ctx := context.Background()
	b, err := oauth.DiscoverBinding(ctx, devClient(), rs.URL, as.Issuer)
	if err != nil {
		t.Fatal(err)
	}
	if b.Issuer != as.Issuer || b.TokenEndpoint != as.Issuer+"/token" || b.Audience != rs.URL {
		t.Fatalf("binding %+v", b)
	}
	got, err := oauth.Refresh(ctx, devClient(), b, oauth.ProducerClient{ID: cred.ClientID, Secret: cred.ClientSecret}, cred.RefreshToken, cred.Scopes)
	if err != nil {
		t.Fatal(err)
	}
	if got.AccessToken == cred.AccessToken || got.RefreshToken == cred.RefreshToken || got.RefreshToken == "" {
		t.Fatal("refresh did not return a new access token and a rotated refresh token")
	}
	if g, ok := as.Introspect(got.AccessToken); !ok || g.Resource != rs.URL {
		t.Fatalf("refreshed token not bound to the resource: %+v", g)
	}
	// Twin: the old refresh token was rotated away, so it is now invalid_grant.
	_, err = oauth.Refresh(ctx, devClient(), b, oauth.ProducerClient{ID: cred.ClientID, Secret: cred.ClientSecret}, cred.RefreshToken, cred.Scopes)
	if !oauth.IsInvalidGrant(err) || !errors.Is(err, oauth.ErrRefreshFailed) {
		t.Fatalf("reused refresh token: got %v, want invalid_grant", err)
	}
	assertClean(t, err, cred.RefreshToken, cred.AccessToken)
}

func TestDiscoverBindingRefusals(t *testing.T) {
	as := oauthtest.NewAuthServer(t, oauthtest.Config{})
	other := oauthtest.NewAuthServer(t, oauthtest.Config{})
	rs := oauthtest.NewResourceServer(t, as)
	ctx := context.Background()

	// An issuer the resource does not name.
	_, err := oauth.DiscoverBinding(ctx, devClient(), rs.URL, other.Issuer)
	var be *oauth.BindingError
	if !errors.As(err, &be) || be.What != "issuer" {
		t.Fatalf("foreign issuer: got %v, want binding mismatch on issuer", err)
	}

	// Metadata that describes another resource.
	foreign := newHTTPServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"resource":"https://elsewhere.example/mcp","authorization_servers":["` + as.Issuer + `"]}`))
	}))
	_, err = oauth.DiscoverBinding(ctx, devClient(), foreign+"/mcp", as.Issuer)
	if !errors.As(err, &be) || be.What != "resource" {
		t.Fatalf("foreign resource: got %v, want binding mismatch on resource", err)
	}

	// An issuer whose metadata names another issuer's token endpoint.
	evil := oauthtest.NewAuthServer(t, oauthtest.Config{TokenEndpoint: other.Issuer + "/token"})
	rs2 := oauthtest.NewResourceServer(t, evil)
	_, err = oauth.DiscoverBinding(ctx, devClient(), rs2.URL, evil.Issuer)
	if !errors.As(err, &be) || be.What != "token_endpoint" || be.Refusal() != oauth.RefusalBindingMismatch {
		t.Fatalf("token endpoint elsewhere: got %v, want binding mismatch on token_endpoint", err)
	}
	if _, err := oauth.DiscoverBinding(ctx, nil, rs.URL, as.Issuer); !errors.Is(err, oauth.ErrHTTPClientRequired) {
		t.Fatalf("nil client: got %v", err)
	}
}

func TestClientCredentials(t *testing.T) {
	as := oauthtest.NewAuthServer(t, oauthtest.Config{Preregistered: map[string]string{"m2m": "s3cret-m2m"}})
	rs := oauthtest.NewResourceServer(t, as)
	ctx := context.Background()
	b, err := oauth.DiscoverBinding(ctx, devClient(), rs.URL, as.Issuer)
	if err != nil {
		t.Fatal(err)
	}
	c, err := oauth.ClientCredentials(ctx, devClient(), b, oauth.ProducerClient{ID: "m2m", Secret: "s3cret-m2m"}, []string{oauthtest.BaseScope})
	if err != nil {
		t.Fatal(err)
	}
	g, ok := as.Introspect(c.AccessToken)
	if !ok || g.Resource != rs.URL || !slices.Equal(c.Scopes, []string{oauthtest.BaseScope}) || c.RefreshToken != "" {
		t.Fatalf("client-credentials token: grant %+v scopes %v", g, c.Scopes)
	}
	// Twin: a wrong secret is invalid_client, and the secret is not in the error.
	_, err = oauth.ClientCredentials(ctx, devClient(), b, oauth.ProducerClient{ID: "m2m", Secret: "wrong-secret"}, nil)
	var re *oauth.RefreshError
	if !errors.As(err, &re) || re.Code != "invalid_client" {
		t.Fatalf("wrong secret: got %v, want invalid_client", err)
	}
	assertClean(t, err, "wrong-secret", "s3cret-m2m")
}

func TestMissingScopes(t *testing.T) {
	if got := oauth.MissingScopes([]string{"a", "b:c", "bad scope\n"}, []string{"a"}); !slices.Equal(got, []string{"b:c"}) {
		t.Fatalf("got %q", got)
	}
	if got := oauth.MissingScopes([]string{"a"}, []string{"a", "b"}); got != nil {
		t.Fatalf("got %q, want none", got)
	}
}
