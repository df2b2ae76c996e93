package oauthtest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/b10x/connector-mcp/mcpclient/oauth"
)

// Login is a workstation's login to rs as a pre-registered confidential client: the
// authorization-code flow with PKCE through an [oauth.Handler] over hc, the browser played by
// [Fetcher]. It returns the grant (access and refresh token) and fails the test on any error.
func Login(t testing.TB, hc *http.Client, rs *ResourceServer, clientID, clientSecret string, scopes []string) *oauth.Credential {
	t.Helper()
	h, err := oauth.NewHandler(oauth.Options{ServerURL: rs.URL, Store: oauth.NewMemoryStore(), HTTPClient: hc,
		ClientID: clientID, ClientSecret: clientSecret, Scopes: scopes,
		RedirectURL: "http://127.0.0.1:8976/callback", Fetcher: Fetcher})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cred, err := h.Login(ctx)
	if err != nil {
		t.Fatalf("oauthtest: login: %v", err)
	}
	return cred
}
