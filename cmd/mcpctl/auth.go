package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/b10x/connector-mcp/mcpclient/oauth"
)

func init() { register(newAuthCmd) }

func newAuthCmd(env *cliEnv) *cobra.Command {
	return groupCmd("auth", "Inspect stored OAuth credentials", newAuthStatusCmd(env))
}

func newAuthStatusCmd(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status [--url URL]",
		Short: "List stored OAuth credentials by resource and issuer (never token values)",
		Args:  cobra.ArbitraryArgs,
	}
	var serverURL string
	cmd.Flags().StringVar(&serverURL, "url", "", "only the credentials of this MCP server")
	cmd.RunE = action(func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		if len(args) > 0 {
			return usagef("auth status: unexpected arguments %q", args)
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
	})
	return cmd
}
