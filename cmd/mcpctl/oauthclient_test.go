package main

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/oauthtest"
	"github.com/b10x/connector-mcp/mcpclient/oauth"
)

const ssrfRedirect = "http://127.0.0.1:8976/callback"

// mcpctl hands package oauth an egress-built client. The MCP server is on 127.0.0.1, the
// authorization server its metadata names on 127.0.0.2. With only 127.0.0.1 allowed (loopback treated like a private range), discovery of the
// authorization server is refused at dial time by egress's policy; allowing both lets it through.
func TestDiscoveryDialsThroughEgressPolicy(t *testing.T) {
	as := oauthtest.NewAuthServer(t, oauthtest.Config{Addr: "127.0.0.2:0"})
	rs := oauthtest.NewResourceServer(t, as)
	login := func(allow ...string) (*oauth.Handler, error) {
		var cidrs []netip.Prefix
		for _, a := range allow {
			cidrs = append(cidrs, netip.MustParsePrefix(a))
		}
		client, err := egress.NewHTTPClient(egress.Policy{IP: egress.IPPolicy{Loopback: egress.LoopbackByCIDRUnsafe, AllowCIDRs: cidrs}, MaxResponseBytes: oauth.MaxResponseBytes})
		if err != nil {
			t.Fatal(err)
		}
		h, err := oauth.NewHandler(oauth.Options{ServerURL: rs.URL, Store: oauth.NewMemoryStore(), HTTPClient: client,
			RedirectURL: ssrfRedirect, Fetcher: oauthtest.Fetcher})
		if err != nil {
			t.Fatal(err)
		}
		_, err = h.Login(context.Background())
		return h, err
	}

	_, err := login("127.0.0.1/32")
	var ae *oauth.AuthorizationError
	var de *egress.DestinationError
	if !errors.As(err, &ae) || ae.Stage != "discovery" || !errors.As(err, &de) {
		t.Fatalf("got %v, want a discovery failure caused by an egress destination refusal", err)
	}
	if got := as.Counts(); got.Registrations+got.Authorizations != 0 {
		t.Fatalf("the refused authorization server was reached: %+v", got)
	}

	if _, err := login("127.0.0.1/32", "127.0.0.2/32"); err != nil {
		t.Fatalf("with both addresses allowed: %v", err)
	}
}

// mcpctl's client for a remote (non-loopback) server URL is the strict policy: plain http and
// loopback are refused outright, so the loopback MCP server reached through it is not even
// probed; package oauth itself refuses to run without a client.
func TestStrictClientRefusesLoopback(t *testing.T) {
	as := oauthtest.NewAuthServer(t, oauthtest.Config{})
	rs := oauthtest.NewResourceServer(t, as)
	if _, err := oauth.NewHandler(oauth.Options{ServerURL: rs.URL, Store: oauth.NewMemoryStore()}); !errors.Is(err, oauth.ErrHTTPClientRequired) {
		t.Fatalf("no client: got %v, want ErrHTTPClientRequired", err)
	}
	strict, err := oauthHTTPClient("https://mcp.example.com/mcp")
	if err != nil {
		t.Fatal(err)
	}
	h, err := oauth.NewHandler(oauth.Options{ServerURL: rs.URL, Store: oauth.NewMemoryStore(), HTTPClient: strict, RedirectURL: ssrfRedirect, Fetcher: oauthtest.Fetcher})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Login(context.Background())
	if !errors.Is(err, egress.ErrSchemeRefused) && !errors.Is(err, egress.ErrDestinationRefused) {
		t.Fatalf("got %v, want an egress refusal", err)
	}
	if got := as.Counts(); got.Authorizations != 0 {
		t.Fatalf("authorization server reached: %+v", got)
	}
}
