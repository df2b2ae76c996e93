package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/b10x/connector-mcp/internal/oauthtest"
	"github.com/b10x/connector-mcp/mcpclient/oauth"
	"github.com/b10x/connector-mcp/refusal"
)

// oauthServer is a protected MCP server (oauthtest) whose authorization server answers as cfg
// says, and the configuration of an mcpclient connection to it through an interactive
// mcpclient/oauth handler whose browser is fetch.
func oauthServer(t *testing.T, cfg oauthtest.Config, fetch auth.AuthorizationCodeFetcher, lim Limits) (*oauthtest.AuthServer, ServerConfig) {
	t.Helper()
	as := oauthtest.NewAuthServer(t, cfg)
	rs := oauthtest.NewResourceServer(t, as)
	hc := &http.Client{Timeout: time.Minute, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	h, err := oauth.NewHandler(oauth.Options{ServerURL: rs.URL, Store: oauth.NewMemoryStore(), HTTPClient: hc,
		RedirectURL: "http://127.0.0.1:8976/callback", Fetcher: fetch})
	if err != nil {
		t.Fatal(err)
	}
	return as, ServerConfig{HTTP: &HTTPServer{URL: rs.URL, OAuthHandler: h}, Limits: lim}
}

// assertNoProse fails when err's text carries the test servers' prose or a token they issued.
func assertNoProse(t *testing.T, err error, as *oauthtest.AuthServer) {
	t.Helper()
	msg := err.Error()
	if strings.Contains(msg, "SERVER-PROSE") {
		t.Errorf("error carries server prose: %q", msg)
	}
	for _, tok := range as.Issued() {
		if strings.Contains(msg, tok) {
			t.Errorf("error carries a token: %q", msg)
		}
	}
}

// A slow authorization server does not spend the operation deadlines: every answer of the
// authorization server takes longer than the whole ProbeTimeout (and CallTimeout), and the
// connect (negotiation, discovery, registration, authorization, token exchange) still succeeds;
// so does a call that needs a step-up authorization (403 insufficient_scope on "admin"). The
// probe and call deadlines count only the MCP exchanges.
func TestSlowAuthorizationServerDoesNotSpendOperationDeadlines(t *testing.T) {
	const probe = time.Second
	as, cfg := oauthServer(t, oauthtest.Config{Delay: probe + 200*time.Millisecond}, oauthtest.Fetcher, Limits{ProbeTimeout: probe, CallTimeout: probe})
	ctx := context.Background()
	start := time.Now()
	s, err := NewClient(nil).Connect(ctx, cfg)
	if err != nil {
		t.Fatalf("connect through a slow authorization server: %v", err)
	}
	defer s.Close()
	if took := time.Since(start); took < probe {
		t.Fatalf("the connect took %v, less than the probe deadline %v: the authorization server was not slow", took, probe)
	}
	if c := as.Counts(); c.CodeGrants != 1 {
		t.Fatalf("authorization server counts %+v, want one code grant", c)
	}
	if _, err := s.CallTool(ctx, "echo", json.RawMessage(`{"text":"hi"}`)); err != nil {
		t.Fatalf("call after the authorization: %v", err)
	}
	if _, err := s.CallTool(ctx, "admin", json.RawMessage(`{"text":"hi"}`)); err != nil {
		t.Fatalf("step-up through the slow authorization server: %v", err)
	}
	if c := as.Counts(); c.CodeGrants != 2 {
		t.Fatalf("counts %+v, want a second (step-up) code grant", c)
	}
}

// Must-fail twin: an authorization server slower than OAuthTimeout ends the connect with the
// named refusal oauth_timeout (not probe_timeout, which is far away), without server prose.
func TestAuthorizationServerPastOAuthTimeoutIsRefused(t *testing.T) {
	lim := Limits{ProbeTimeout: time.Minute, CallTimeout: time.Minute, OAuthTimeout: 500 * time.Millisecond}
	as, cfg := oauthServer(t, oauthtest.Config{Delay: 2 * time.Second}, oauthtest.Fetcher, lim)
	_, err := NewClient(nil).Connect(context.Background(), cfg)
	if !errors.Is(err, ErrOAuthTimeout) || refusal.Name(err) != RefusalOAuthTimeout {
		t.Fatalf("got %v (refusal %q), want oauth_timeout", err, refusal.Name(err))
	}
	var r *RefusalError
	if !errors.As(err, &r) || r.Limit != 500 {
		t.Fatalf("refusal %#v, want the limit in milliseconds", r)
	}
	assertNoProse(t, err, as)
	if c := as.Counts(); c.CodeGrants != 0 {
		t.Fatalf("counts %+v: nothing should have been granted", c)
	}
}

// The interactive part (the user in the browser) runs under LoginTimeout, not OAuthTimeout: a
// user who takes longer than OAuthTimeout still completes the connect.
func TestInteractiveLoginHasItsOwnDeadline(t *testing.T) {
	const oauthLimit = 500 * time.Millisecond
	slowUser := func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
		select {
		case <-time.After(3 * oauthLimit):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return oauthtest.Fetcher(ctx, args)
	}
	_, cfg := oauthServer(t, oauthtest.Config{}, slowUser, Limits{OAuthTimeout: oauthLimit, LoginTimeout: time.Minute})
	s, err := NewClient(nil).Connect(context.Background(), cfg)
	if err != nil {
		t.Fatalf("a user slower than OAuthTimeout: %v", err)
	}
	s.Close()
}

// Must-fail twin: a user who never completes the authorization ends the connect with
// login_timeout once LoginTimeout has passed.
func TestInteractiveLoginPastLoginTimeoutIsRefused(t *testing.T) {
	var waited atomic.Bool
	absentUser := func(ctx context.Context, _ *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
		waited.Store(true)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	as, cfg := oauthServer(t, oauthtest.Config{}, absentUser, Limits{ProbeTimeout: time.Minute, OAuthTimeout: time.Minute, LoginTimeout: 300 * time.Millisecond})
	_, err := NewClient(nil).Connect(context.Background(), cfg)
	if !errors.Is(err, ErrLoginTimeout) || refusal.Name(err) != RefusalLoginTimeout {
		t.Fatalf("got %v (refusal %q), want login_timeout", err, refusal.Name(err))
	}
	if !waited.Load() {
		t.Fatal("the fetcher never ran")
	}
	assertNoProse(t, err, as)
}

// The operation clock counts running time only: paused, it does not fire; resumed, it fires
// with the time that was left.
func TestOpClockPauses(t *testing.T) {
	fired := make(chan time.Time, 1)
	c := newOpClock(200*time.Millisecond, func() { fired <- time.Now() })
	defer c.stop()
	resume := c.pause()
	inner := c.pause() // pauses nest
	select {
	case <-fired:
		t.Fatal("a paused clock fired")
	case <-time.After(500 * time.Millisecond):
	}
	inner()
	resume()
	resume() // idempotent
	select {
	case <-fired:
	case <-time.After(5 * time.Second):
		t.Fatal("a resumed clock never fired")
	}
	stopped := newOpClock(50*time.Millisecond, func() { fired <- time.Now() })
	stopped.stop()
	select {
	case <-fired:
		t.Fatal("a stopped clock fired")
	case <-time.After(200 * time.Millisecond):
	}
}
