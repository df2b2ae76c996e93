package oauth_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/b10x/connector-mcp/internal/oauthtest"
	"github.com/b10x/connector-mcp/mcpclient/oauth"
)

// devClient reaches the loopback test servers: a plain client that follows no redirect, as the
// egress-built clients of mcpctl and the manager do not (this package owns no socket; its
// callers' egress clients are tested beside them).
func devClient() *http.Client {
	return &http.Client{
		Timeout:       30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

const redirect = "http://127.0.0.1:8976/callback"

func newHandler(t *testing.T, rs *oauthtest.ResourceServer, store oauth.Store, interactive bool) *oauth.Handler {
	t.Helper()
	opts := oauth.Options{ServerURL: rs.URL, Store: store, HTTPClient: devClient()}
	if interactive {
		opts.Fetcher, opts.RedirectURL = oauthtest.Fetcher, redirect
	}
	h, err := oauth.NewHandler(opts)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// callTool connects to rs through h and calls tool; it returns the error of the first step
// that fails.
func callTool(t *testing.T, rs *oauthtest.ResourceServer, h auth.OAuthHandler, tools ...string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: rs.URL, OAuthHandler: h, HTTPClient: devClient()}, nil)
	if err != nil {
		return err
	}
	defer cs.Close()
	for _, tool := range tools {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": "hi"}})
		if err != nil {
			return err
		}
		if res.IsError {
			return errors.New("tool error")
		}
	}
	return nil
}

// assertClean fails when err's text carries server prose or any of the secrets.
func assertClean(t *testing.T, err error, secrets ...string) {
	t.Helper()
	if err == nil {
		return
	}
	msg := err.Error()
	if strings.Contains(msg, "SERVER-PROSE") {
		t.Errorf("error carries server prose: %q", msg)
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(msg, s) {
			t.Errorf("error carries a secret: %q", msg)
		}
	}
}

func secretsOf(t *testing.T, store oauth.Store) []string {
	t.Helper()
	creds, err := store.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range creds {
		out = append(out, c.AccessToken, c.RefreshToken, c.ClientSecret)
	}
	return out
}

func onlyCred(t *testing.T, store oauth.Store, resource string) *oauth.Credential {
	t.Helper()
	creds, err := store.List(context.Background(), resource)
	if err != nil {
		t.Fatal(err)
	}
	if len(creds) != 1 {
		t.Fatalf("credentials for %s: got %d, want 1", resource, len(creds))
	}
	return creds[0]
}

func TestAuthorizationStoresCredentialBoundToResourceAndIssuer(t *testing.T) {
	as := oauthtest.NewAuthServer(t, oauthtest.Config{})
	rs := oauthtest.NewResourceServer(t, as)
	store := oauth.NewMemoryStore()

	if err := callTool(t, rs, newHandler(t, rs, store, true), "echo"); err != nil {
		t.Fatalf("first connection: %v", err)
	}
	c := onlyCred(t, store, rs.URL)
	if c.Key != (oauth.Key{Resource: rs.URL, Issuer: as.Issuer}) || c.Audience != rs.URL {
		t.Errorf("credential key %+v audience %q, want (%s, %s)", c.Key, c.Audience, rs.URL, as.Issuer)
	}
	if !slices.Contains(c.Scopes, oauthtest.BaseScope) || c.RefreshToken == "" || c.TokenURL != as.Issuer+"/token" {
		t.Errorf("credential scopes %v, refresh set %v, token url %q", c.Scopes, c.RefreshToken != "", c.TokenURL)
	}
	if got := as.Counts(); got.Registrations != 1 || got.CodeGrants != 1 {
		t.Errorf("counts after first authorization: %+v", got)
	}
	if s := c.String() + " " + c.GoString(); strings.Contains(s, c.AccessToken) || strings.Contains(s, c.RefreshToken) {
		t.Errorf("credential String shows a token: %q", s)
	}

	// A later process with the same store and no way to prompt uses the stored credential.
	if err := callTool(t, rs, newHandler(t, rs, store, false), "echo"); err != nil {
		t.Fatalf("stored credential not used: %v", err)
	}
	if got := as.Counts(); got.CodeGrants != 1 || got.Authorizations != 1 {
		t.Errorf("a stored credential triggered a new authorization: %+v", got)
	}
}

func TestNothingStoredNeedsLogin(t *testing.T) {
	as := oauthtest.NewAuthServer(t, oauthtest.Config{})
	rs := oauthtest.NewResourceServer(t, as)
	h := newHandler(t, rs, oauth.NewMemoryStore(), false)
	if ts, err := h.TokenSource(context.Background()); ts != nil || err != nil {
		t.Fatalf("empty store: token source %v, %v; want nil, nil", ts, err)
	}
	err := callTool(t, rs, h, "echo")
	var lr *oauth.LoginRequiredError
	if !errors.As(err, &lr) || lr.Refusal() != "login_required" {
		t.Fatalf("got %v, want a login_required refusal", err)
	}
	assertClean(t, err)
	if got := as.Counts(); got.Authorizations != 0 {
		t.Errorf("a non-interactive handler started an authorization: %+v", got)
	}
}

func TestSecondResourceGetsItsOwnAuthorization(t *testing.T) {
	as := oauthtest.NewAuthServer(t, oauthtest.Config{})
	rs1 := oauthtest.NewResourceServer(t, as)
	rs2 := oauthtest.NewResourceServer(t, as)
	store := oauth.NewMemoryStore()
	if err := callTool(t, rs1, newHandler(t, rs1, store, true), "echo"); err != nil {
		t.Fatal(err)
	}
	tok1 := onlyCred(t, store, rs1.URL).AccessToken

	// Without a prompt the second resource is refused: the first resource's token is not reused.
	err := callTool(t, rs2, newHandler(t, rs2, store, false), "echo")
	if !errors.Is(err, oauth.ErrLoginRequired) {
		t.Fatalf("second resource without prompt: got %v, want login required", err)
	}
	if err := callTool(t, rs2, newHandler(t, rs2, store, true), "echo"); err != nil {
		t.Fatal(err)
	}
	tok2 := onlyCred(t, store, rs2.URL).AccessToken
	if got := as.Counts(); got.CodeGrants != 2 || got.Registrations != 1 {
		t.Errorf("want a second authorization reusing the registration, got %+v", got)
	}
	if slices.Contains(rs2.Presented(), tok1) || slices.Contains(rs1.Presented(), tok2) {
		t.Error("a token was presented to a resource it is not bound to")
	}
	if tok1 == tok2 {
		t.Error("both resources hold the same token")
	}
}

func TestMigratedIssuerTriggersNewAuthorization(t *testing.T) {
	asA := oauthtest.NewAuthServer(t, oauthtest.Config{})
	asB := oauthtest.NewAuthServer(t, oauthtest.Config{})
	rs := oauthtest.NewResourceServer(t, asA)
	store := oauth.NewMemoryStore()
	if err := callTool(t, rs, newHandler(t, rs, store, true), "echo"); err != nil {
		t.Fatal(err)
	}
	rs.MigrateTo(asB)

	// Must fail: the credential from the old issuer is not reused for the new one.
	err := callTool(t, rs, newHandler(t, rs, store, false), "echo")
	if !errors.Is(err, oauth.ErrLoginRequired) {
		t.Fatalf("after migration without prompt: got %v, want login required", err)
	}
	if err := callTool(t, rs, newHandler(t, rs, store, true), "echo"); err != nil {
		t.Fatalf("after migration with prompt: %v", err)
	}
	if got := asB.Counts(); got.CodeGrants != 1 || got.Registrations != 1 {
		t.Errorf("new issuer: want one registration and one grant, got %+v", got)
	}
	if got := asA.Counts(); got.CodeGrants != 1 || got.Refreshes != 0 {
		t.Errorf("old issuer was asked again: %+v", got)
	}
	b, err := store.Load(context.Background(), oauth.Key{Resource: rs.URL, Issuer: asB.Issuer})
	if err != nil {
		t.Fatalf("no credential under the new issuer: %v", err)
	}
	a, err := store.Load(context.Background(), oauth.Key{Resource: rs.URL, Issuer: asA.Issuer})
	if err != nil || a.AccessToken == b.AccessToken {
		t.Fatalf("old-issuer credential: %v (same token: %v)", err, a != nil && a.AccessToken == b.AccessToken)
	}
	// The newest credential (the new issuer's) is presented first from now on.
	if err := callTool(t, rs, newHandler(t, rs, store, false), "echo"); err != nil {
		t.Fatalf("new-issuer credential not used: %v", err)
	}
}

// expire rewrites the stored credential of key as expired.
func expire(t *testing.T, store oauth.Store, key oauth.Key) *oauth.Credential {
	t.Helper()
	c, err := store.Load(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	c.Expiry = time.Now().Add(-time.Hour)
	if err := store.Save(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRefreshOnExpiryIsPersisted(t *testing.T) {
	as := oauthtest.NewAuthServer(t, oauthtest.Config{})
	rs := oauthtest.NewResourceServer(t, as)
	store := oauth.NewMemoryStore()
	if err := callTool(t, rs, newHandler(t, rs, store, true), "echo"); err != nil {
		t.Fatal(err)
	}
	key := oauth.Key{Resource: rs.URL, Issuer: as.Issuer}
	old := expire(t, store, key)
	before := len(rs.Presented())

	if err := callTool(t, rs, newHandler(t, rs, store, false), "echo", "echo"); err != nil {
		t.Fatalf("expired credential not refreshed: %v", err)
	}
	if got := as.Counts(); got.Refreshes != 1 || got.CodeGrants != 1 {
		t.Errorf("want exactly one refresh and no new authorization, got %+v", got)
	}
	now, err := store.Load(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if now.AccessToken == old.AccessToken || now.RefreshToken == old.RefreshToken || !now.Expiry.After(time.Now()) {
		t.Error("the refreshed (rotated) token was not persisted")
	}
	if slices.Contains(rs.Presented()[before:], old.AccessToken) {
		t.Error("the expired token was presented")
	}
}

func TestFailedRefreshLosesNothingAndNeedsLogin(t *testing.T) {
	as := oauthtest.NewAuthServer(t, oauthtest.Config{})
	rs := oauthtest.NewResourceServer(t, as)
	store := oauth.NewMemoryStore()
	if err := callTool(t, rs, newHandler(t, rs, store, true), "echo"); err != nil {
		t.Fatal(err)
	}
	key := oauth.Key{Resource: rs.URL, Issuer: as.Issuer}
	old := expire(t, store, key)
	as.RevokeAll()

	err := callTool(t, rs, newHandler(t, rs, store, false), "echo")
	if !errors.Is(err, oauth.ErrLoginRequired) {
		t.Fatalf("after invalid_grant without prompt: got %v, want login required", err)
	}
	assertClean(t, err, old.AccessToken, old.RefreshToken, old.ClientSecret)
	kept, err := store.Load(context.Background(), key)
	if err != nil || kept.RefreshToken != old.RefreshToken || kept.AccessToken != old.AccessToken {
		t.Fatalf("a failed refresh changed the stored credential (%v)", err)
	}
}

func TestInvalidGrantLeadsToReauthorization(t *testing.T) {
	as := oauthtest.NewAuthServer(t, oauthtest.Config{})
	rs := oauthtest.NewResourceServer(t, as)
	store := oauth.NewMemoryStore()
	if err := callTool(t, rs, newHandler(t, rs, store, true), "echo"); err != nil {
		t.Fatal(err)
	}
	key := oauth.Key{Resource: rs.URL, Issuer: as.Issuer}
	old := expire(t, store, key)
	as.RevokeAll()

	if err := callTool(t, rs, newHandler(t, rs, store, true), "echo"); err != nil {
		t.Fatalf("re-authorization after invalid_grant: %v", err)
	}
	if got := as.Counts(); got.CodeGrants != 2 || got.Registrations != 1 {
		t.Errorf("want a second authorization with the kept registration, got %+v", got)
	}
	if now := onlyCred(t, store, rs.URL); now.RefreshToken == old.RefreshToken {
		t.Error("the re-authorized credential was not stored")
	}
}

func TestRevokedAccessTokenIsRefreshedOnce(t *testing.T) {
	as := oauthtest.NewAuthServer(t, oauthtest.Config{})
	rs := oauthtest.NewResourceServer(t, as)
	store := oauth.NewMemoryStore()
	if err := callTool(t, rs, newHandler(t, rs, store, true), "echo"); err != nil {
		t.Fatal(err)
	}
	// The server forgets the access token but not the refresh token; the stored token has
	// not expired, so the 401 is what triggers the refresh.
	c := onlyCred(t, store, rs.URL)
	c.AccessToken = "at-forgotten"
	if err := store.Save(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if err := callTool(t, rs, newHandler(t, rs, store, false), "echo"); err != nil {
		t.Fatalf("rejected access token not refreshed: %v", err)
	}
	if got := as.Counts(); got.Refreshes != 1 || got.CodeGrants != 1 {
		t.Errorf("want one refresh, no new authorization: %+v", got)
	}
}

func TestStepUpKeepsEarlierScopes(t *testing.T) {
	as := oauthtest.NewAuthServer(t, oauthtest.Config{})
	rs := oauthtest.NewResourceServer(t, as)
	store := oauth.NewMemoryStore()
	if err := callTool(t, rs, newHandler(t, rs, store, true), "echo"); err != nil {
		t.Fatal(err)
	}
	// Must fail: a step-up needs a new authorization, which a non-interactive handler refuses.
	err := callTool(t, rs, newHandler(t, rs, store, false), "admin")
	if !errors.Is(err, oauth.ErrLoginRequired) || !strings.Contains(err.Error(), "--scope "+oauthtest.AdminScope) {
		t.Fatalf("step-up without prompt: got %v, want login required naming the scope", err)
	}
	assertClean(t, err, secretsOf(t, store)...)

	if err := callTool(t, rs, newHandler(t, rs, store, true), "admin", "echo"); err != nil {
		t.Fatalf("step-up: %v", err)
	}
	req := as.RequestedScopes()
	last := req[len(req)-1]
	if !slices.Contains(last, oauthtest.BaseScope) || !slices.Contains(last, oauthtest.AdminScope) {
		t.Errorf("step-up requested %v, want the earlier scope kept with the new one", last)
	}
	c := onlyCred(t, store, rs.URL)
	if !slices.Contains(c.Scopes, oauthtest.AdminScope) || !slices.Contains(c.Scopes, oauthtest.BaseScope) {
		t.Errorf("stored scopes after step-up: %v", c.Scopes)
	}
	// The stepped-up credential serves both tools without another authorization.
	if err := callTool(t, rs, newHandler(t, rs, store, false), "admin", "echo"); err != nil {
		t.Fatal(err)
	}
}

func TestDeniedAuthorizationIsNamedWithoutProse(t *testing.T) {
	as := oauthtest.NewAuthServer(t, oauthtest.Config{})
	rs := oauthtest.NewResourceServer(t, as)
	lb, err := oauth.ListenLoopback(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	as.DenyNext()
	h, err := oauth.NewHandler(oauth.Options{
		ServerURL: rs.URL, Store: oauth.NewMemoryStore(), HTTPClient: devClient(),
		RedirectURL: lb.URL(), Fetcher: lb.Fetcher(deliver(t), nil, 20*time.Second),
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Login(context.Background())
	var de *oauth.DeniedError
	if !errors.As(err, &de) || de.Refusal() != "authorization_denied" || !errors.Is(err, oauth.ErrAuthorizationFailed) {
		t.Fatalf("got %v, want authorization_denied", err)
	}
	assertClean(t, err)
}

// deliver plays the browser for a loopback redirect: approve at the authorization server, then
// load the redirect in the listener.
func deliver(t *testing.T) func(string) error {
	return func(authURL string) error {
		go func() {
			u, err := oauthtest.Approve(authURL)
			if err != nil {
				t.Errorf("approve: %v", err)
				return
			}
			// The listener may already be closed when the flow ends on this very delivery; the
			// test judges the outcome, not this request.
			if resp, err := get(u.String()); err == nil {
				resp.Body.Close()
			}
		}()
		return nil
	}
}

func TestLoginThroughLoopbackRedirect(t *testing.T) {
	as := oauthtest.NewAuthServer(t, oauthtest.Config{})
	rs := oauthtest.NewResourceServer(t, as)
	store := oauth.NewMemoryStore()
	lb, err := oauth.ListenLoopback(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	if !strings.HasPrefix(lb.URL(), "http://127.0.0.1:") {
		t.Fatalf("redirect URL %q is not on 127.0.0.1", lb.URL())
	}
	var progress strings.Builder
	h, err := oauth.NewHandler(oauth.Options{
		ServerURL: rs.URL, Store: store, HTTPClient: devClient(), Scopes: []string{oauthtest.AdminScope},
		RedirectURL: lb.URL(), Fetcher: lb.Fetcher(deliver(t), &progress, 20*time.Second),
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := h.Login(context.Background())
	if err != nil {
		t.Fatalf("login: %v", err)
	}
	if c.Issuer != as.Issuer || !slices.Contains(c.Scopes, oauthtest.AdminScope) {
		t.Errorf("login credential %v scopes %v", c, c.Scopes)
	}
	if !strings.Contains(progress.String(), "Waiting") {
		t.Errorf("no progress line: %q", progress.String())
	}
	// Login always authorizes afresh, even with a stored credential.
	if _, err := h.Login(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := as.Counts(); got.CodeGrants != 2 {
		t.Errorf("second login: %+v", got)
	}
}

func TestLoopbackIgnoresForeignState(t *testing.T) {
	lb, err := oauth.ListenLoopback(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	authURL := "http://127.0.0.1:1/authorize?state=expected-state"
	delivered := make(chan struct{})
	fetch := lb.Fetcher(func(string) error {
		go func() {
			defer close(delivered)
			for _, st := range []string{"forged", "expected-state"} {
				resp, err := get(lb.URL() + "?code=c-" + st + "&state=" + st)
				if err != nil {
					t.Errorf("deliver: %v", err)
					return
				}
				resp.Body.Close()
				if want := map[string]int{"forged": 400, "expected-state": 200}[st]; resp.StatusCode != want {
					t.Errorf("state %s: status %d, want %d", st, resp.StatusCode, want)
				}
			}
		}()
		return nil
	}, nil, 20*time.Second)
	res, err := fetch(context.Background(), &auth.AuthorizationArgs{URL: authURL})
	<-delivered
	if err != nil || res.Code != "c-expected-state" {
		t.Fatalf("got %+v, %v", res, err)
	}
	// Must fail: nobody completes the authorization before the deadline.
	_, err = lb.Fetcher(func(string) error { return nil }, nil, time.Millisecond)(context.Background(), &auth.AuthorizationArgs{URL: authURL})
	if !errors.Is(err, oauth.ErrAuthorizationTimeout) {
		t.Fatalf("got %v, want timeout", err)
	}
}

func TestLoginRefusesUnprotectedServer(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "open", Version: "1"}, nil)
	ts := newHTTPServer(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true}))
	h, err := oauth.NewHandler(oauth.Options{ServerURL: ts + "/mcp", Store: oauth.NewMemoryStore(), HTTPClient: devClient(),
		RedirectURL: redirect, Fetcher: oauthtest.Fetcher})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Login(context.Background()); !errors.Is(err, oauth.ErrNotProtected) {
		t.Fatalf("got %v, want ErrNotProtected", err)
	}
}

// Concurrent requests that all fail with the same revoked token lead to one authorization: the
// others retry with its token.
func TestConcurrentRejectionsAuthorizeOnce(t *testing.T) {
	as := oauthtest.NewAuthServer(t, oauthtest.Config{})
	rs := oauthtest.NewResourceServer(t, as)
	h := newHandler(t, rs, oauth.NewMemoryStore(), true)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: rs.URL, OAuthHandler: h, HTTPClient: devClient()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	as.RevokeAll()
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}})
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Errorf("call: %v", err)
		}
	}
	if got := as.Counts(); got.CodeGrants != 2 {
		t.Errorf("want one re-authorization for four rejected calls, got %+v", got)
	}
}
