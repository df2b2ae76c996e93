package main

// Auth scenarios: every scored auth/ scenario of the suite runs the same flow through
// mcpclient/oauth (go-sdk's authorization code handler behind the project's custody and binding
// layer), as a consumer would: a fresh in-memory store, discovery through the egress-guarded
// client (loopback allowed: the suite's servers are on localhost), the test authorization
// server's immediate redirect played by a headless "browser".

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/mcpclient"
	"github.com/b10x/connector-mcp/mcpclient/oauth"
)

// authScenarios are the auth scenarios of --suite auth and of the 2025-11-25 and 2026-07-28
// requirement sets (suite 0.2.0-alpha.12). The extension scenarios (client credentials, DPoP,
// enterprise-managed authorization, workload identity) are not scored and not registered.
var authScenarios = []string{
	"auth/metadata-default", "auth/metadata-var1", "auth/metadata-var2", "auth/metadata-var3",
	"auth/basic-cimd", "auth/scope-from-www-authenticate", "auth/scope-from-scopes-supported",
	"auth/scope-omitted-when-undefined", "auth/scope-step-up", "auth/scope-retry-limit",
	"auth/token-endpoint-auth-basic", "auth/token-endpoint-auth-post", "auth/token-endpoint-auth-none",
	"auth/pre-registration", "auth/2025-03-26-oauth-metadata-backcompat",
	"auth/2025-03-26-oauth-endpoint-fallback", "auth/resource-mismatch", "auth/offline-access-scope",
	"auth/offline-access-not-supported", "auth/authorization-server-migration", "auth/iss-supported",
	"auth/iss-not-advertised", "auth/iss-supported-missing", "auth/iss-wrong-issuer",
	"auth/iss-unexpected", "auth/iss-normalized", "auth/metadata-issuer-mismatch",
}

func init() {
	for _, name := range authScenarios {
		register(name, authFlow)
	}
}

// authRedirectURL is the redirect URI the suite's authorization server redirects to (nothing
// listens there: the headless browser reads the redirect instead of following it).
const authRedirectURL = "http://localhost:3000/callback"

// authMetadataURL is the Client ID Metadata Document URL the suite accepts.
const authMetadataURL = "https://conformance-test.local/client-metadata.json"

// headlessBrowser loads the authorization URL (the suite's server approves at once) and returns
// the code, state and iss of the redirect without following it.
func headlessBrowser(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, args.URL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || loc.String() == "" {
		return nil, errors.New("authorization endpoint did not redirect")
	}
	q := loc.Query()
	return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
}

// authFlow connects with an OAuth handler, lists the tools and calls test-tool.
func authFlow(ctx context.Context, serverURL string, conf map[string]any) error {
	hc, err := egress.NewHTTPClient(egress.Policy{IP: egress.IPPolicy{Loopback: egress.LoopbackAllowedUnsafe}, MaxResponseBytes: oauth.MaxResponseBytes})
	if err != nil {
		return err
	}
	opts := oauth.Options{
		ServerURL: serverURL, Store: oauth.NewMemoryStore(), HTTPClient: hc,
		RedirectURL: authRedirectURL, Fetcher: headlessBrowser,
		ClientMetadataURL: authMetadataURL, ClientName: "connector-mcp-conformance",
	}
	// auth/pre-registration passes the pre-registered client in the context.
	if id, ok := conf["client_id"].(string); ok {
		opts.ClientID = id
		opts.ClientSecret, _ = conf["client_secret"].(string)
	}
	h, err := oauth.NewHandler(opts)
	if err != nil {
		return err
	}
	s, err := client.Connect(ctx, mcpclient.ServerConfig{HTTP: &mcpclient.HTTPServer{URL: serverURL, OAuthHandler: h}})
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer s.Close()
	if _, err := s.ListTools(ctx); err != nil {
		return fmt.Errorf("list tools: %w", err)
	}
	if _, err := s.CallTool(ctx, "test-tool", json.RawMessage(`{}`)); err != nil {
		return fmt.Errorf("call test-tool: %w", err)
	}
	return nil
}
