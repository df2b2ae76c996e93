package main

import (
	"github.com/spf13/cobra"

	"github.com/b10x/connector-mcp/mcpclient/oauth"
)

func init() { register(newLogoutCmd) }

func newLogoutCmd(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "logout --url URL",
		Short: "Forget the stored OAuth credentials of an MCP server",
		Args:  cobra.ArbitraryArgs,
	}
	var serverURL string
	cmd.Flags().StringVar(&serverURL, "url", "", "MCP server URL (Streamable HTTP)")
	cmd.RunE = action(func(cmd *cobra.Command, args []string) error {
		if serverURL == "" || len(args) > 0 {
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
		n, err := oauth.Forget(cmd.Context(), store, resource)
		if err != nil {
			return err
		}
		return writeJSON(env.stdout, map[string]any{"resource": resource, "removed": n})
	})
	return cmd
}
