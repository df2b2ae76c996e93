package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/mcpclient/oauth"
)

// oauthStore opens the CLI's XDG credential store ($XDG_STATE_HOME/connector-mcp/oauth).
func oauthStore(env *cliEnv) (*oauth.XDGStore, error) {
	dir, err := oauth.DefaultDir(env.getenv)
	if err != nil {
		return nil, err
	}
	return oauth.NewXDGStore(dir), nil
}

// isLoopbackURL reports whether raw names a loopback host (127.0.0.0/8, ::1 or localhost).
func isLoopbackURL(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	h := u.Hostname()
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// oauthHTTPClient is the client mcpctl hands package oauth for discovery, registration and token
// requests made on behalf of the MCP server at serverURL: egress's guarded client (responses
// bounded to oauth.MaxResponseBytes, redirects refused, no proxy from the environment), refusing private, link-local
// and metadata addresses always, and loopback unless the MCP server itself is on loopback (local
// development) — a remote server's metadata can never point mcpctl at the user's own machine.
func oauthHTTPClient(serverURL string) (*http.Client, error) {
	ip := egress.IPPolicy{}
	if isLoopbackURL(serverURL) {
		ip.Loopback = egress.LoopbackAllowedUnsafe
	}
	return egress.NewHTTPClient(egress.Policy{IP: ip, MaxResponseBytes: oauth.MaxResponseBytes})
}

// oauthHandlerFor returns the OAuth handler that presents (and refreshes) stored credentials for
// the MCP server at serverURL, or nil when none are stored. It never prompts: when a new
// authorization is needed the request fails with the "login_required" refusal.
func oauthHandlerFor(ctx context.Context, env *cliEnv, serverURL string) (auth.OAuthHandler, error) {
	resource, err := oauth.CanonicalResource(serverURL)
	if err != nil {
		return nil, nil // not an http(s) server URL: nothing can be stored for it
	}
	store, err := oauthStore(env)
	if errors.Is(err, oauth.ErrNoStateDir) {
		return nil, nil // no state directory: nothing can have been stored
	}
	if err != nil {
		return nil, err
	}
	creds, err := store.List(ctx, resource)
	if err != nil {
		return nil, err
	}
	if len(creds) == 0 {
		return nil, nil
	}
	client, err := oauthHTTPClient(serverURL)
	if err != nil {
		return nil, err
	}
	h, err := oauth.NewHandler(oauth.Options{ServerURL: serverURL, Store: store, HTTPClient: client})
	if err != nil {
		return nil, err
	}
	return h, nil
}

// openBrowser starts the user's browser on u when an opener exists ($BROWSER, xdg-open or
// open), as a plain argv (never a shell); it is best effort and never required. Tests replace it.
var openBrowser = func(env *cliEnv, u string) {
	var opener string
	if b := env.getenv("BROWSER"); b != "" && !strings.ContainsAny(b, " \t%") {
		opener = b
	} else if runtime.GOOS == "darwin" {
		opener = "open"
	} else {
		opener = "xdg-open"
	}
	path, err := exec.LookPath(opener)
	if err != nil {
		return
	}
	// The browser outlives the command, so no context; argv only (no shell), the URL is one
	// argument.
	cmd := exec.Command(path, u) //nolint:gosec // G204: the opener is $BROWSER, xdg-open or open from PATH, by the user's choice
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, nil, nil
	cmd.Env = os.Environ()
	if cmd.Start() == nil {
		go func() { _ = cmd.Wait() }()
	}
}
