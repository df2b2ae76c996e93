package main

import (
	"context"
	"time"

	"github.com/spf13/pflag"

	"github.com/b10x/connector-mcp/mcpclient/oauth"
)

func init() {
	register("auth", verb{
		summary: "auth status [--url URL]: list stored OAuth credentials by resource and issuer (never token values)",
		run:     runAuth,
	})
}

func runAuth(ctx context.Context, env *cliEnv, args []string) error {
	if len(args) == 0 || args[0] != "status" {
		return usagef("auth: the only sub-command is \"status\"")
	}
	fs := pflag.NewFlagSet("auth status", pflag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var serverURL string
	fs.StringVar(&serverURL, "url", "", "only the credentials of this MCP server")
	if err := fs.Parse(args[1:]); err != nil {
		return usagef("auth status: %v", err)
	}
	if fs.NArg() > 0 {
		return usagef("auth status: unexpected arguments %q", fs.Args())
	}
	var resource string
	if serverURL != "" {
		r, err := oauth.CanonicalResource(serverURL)
		if err != nil {
			return usagef("auth status: --url must be an http(s) URL without user information")
		}
		resource = r
	}
	store, err := oauthStore(env)
	if err != nil {
		return err
	}
	creds, err := store.List(ctx, resource)
	if err != nil {
		return err
	}
	now := time.Now()
	views := make([]credentialView, 0, len(creds))
	for _, c := range creds {
		views = append(views, viewOf(c, now))
	}
	return writeJSON(env.stdout, map[string]any{"store": store.Dir(), "credentials": views})
}
