package oauth_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/b10x/connector-mcp/mcpclient/oauth"
)

// A handler that only presents and refreshes stored credentials (no prompt), handed to the
// go-sdk Streamable HTTP transport.
func ExampleNewHandler() {
	dir, err := oauth.DefaultDir(os.Getenv)
	if err != nil {
		fmt.Println(err)
		return
	}
	h, err := oauth.NewHandler(oauth.Options{
		ServerURL:  "https://mcp.example.com/mcp",
		Store:      oauth.NewXDGStore(dir),
		HTTPClient: guardedClient(), // the caller's egress-built client
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	transport := &mcp.StreamableClientTransport{Endpoint: h.Resource(), OAuthHandler: h}
	_ = transport
	fmt.Println(h.Resource())
	// Output: https://mcp.example.com/mcp
}

// An interactive login through a loopback redirect listener.
func ExampleHandler_Login() {
	lb, err := oauth.ListenLoopback(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lb.Close()
	open := func(authURL string) error {
		fmt.Fprintln(os.Stderr, "Open this URL to authorize:", authURL)
		return nil
	}
	h, err := oauth.NewHandler(oauth.Options{
		ServerURL:   "https://mcp.example.com/mcp",
		Store:       oauth.NewMemoryStore(),
		HTTPClient:  guardedClient(), // the caller's egress-built client
		RedirectURL: lb.URL(),
		Fetcher:     lb.Fetcher(open, os.Stderr, 5*time.Minute),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if cred, err := h.Login(ctx); err == nil {
		fmt.Println("stored", cred) // prints resource and issuer, never the token
	}
}

// guardedClient stands for the caller's egress-built client (in mcpctl and the manager:
// egress.NewHTTPClient with the dial-time IP policy and oauth.MaxResponseBytes).
func guardedClient() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
