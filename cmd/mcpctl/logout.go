package main

import (
	"context"

	"github.com/spf13/pflag"

	"github.com/b10x/connector-mcp/mcpclient/oauth"
)

func init() {
	register("logout", verb{
		summary: "forget the stored OAuth credentials of an MCP server (--url URL)",
		run:     runLogout,
	})
}

func runLogout(ctx context.Context, env *cliEnv, args []string) error {
	fs := pflag.NewFlagSet("logout", pflag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var serverURL string
	fs.StringVar(&serverURL, "url", "", "MCP server URL (Streamable HTTP)")
	if err := fs.Parse(args); err != nil {
		return usagef("logout: %v", err)
	}
	if serverURL == "" || fs.NArg() > 0 {
		return usagef("logout: --url URL is required (and nothing else)")
	}
	resource, err := oauth.CanonicalResource(serverURL)
	if err != nil {
		return usagef("logout: --url must be an http(s) URL without user information")
	}
	store, err := oauthStore(env)
	if err != nil {
		return err
	}
	n, err := oauth.Forget(ctx, store, resource)
	if err != nil {
		return err
	}
	return writeJSON(env.stdout, map[string]any{"resource": resource, "removed": n})
}
