package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/b10x/connector-mcp/internal/oauthk8s"
	"github.com/b10x/connector-mcp/mcpclient/oauth"
)

func init() { register(newAuthCmd) }

func newAuthCmd(env *cliEnv) *cobra.Command {
	return groupCmd("auth", "Inspect stored OAuth credentials", newAuthStatusCmd(env))
}

func newAuthStatusCmd(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status [--url URL | --secret NAMESPACE/NAME [-o json|yaml]]",
		Short: "List stored OAuth credentials by resource and issuer, or describe an in-cluster McpCredential (never token values)",
		Args:  cobra.ArbitraryArgs,
	}
	var serverURL, secret string
	cmd.Flags().StringVar(&serverURL, "url", "", "only the credentials of this MCP server")
	cmd.Flags().StringVar(&secret, "secret", "", "describe the in-cluster credential NAMESPACE/NAME (McpCredential and its target Secret): binding, expiry, scopes, readiness")
	out := addOutputFlag(cmd, "human; the store listing is always JSON", formatJSON, formatYAML)
	kube := addKubeFlags(cmd, false)
	cmd.RunE = action(func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		if len(args) > 0 {
			return usagef("auth status: unexpected arguments %q", args)
		}
		format, err := out.format()
		if err != nil {
			return err
		}
		if secret != "" || format != formatHuman {
			if secret == "" || serverURL != "" {
				return usagef("auth status: -o goes with --secret NAMESPACE/NAME, and --secret not with --url (see %s --help)", cmd.CommandPath())
			}
			return clusterAuthStatus(ctx, env, kube, secret, format)
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

// clusterAuthStatus prints the binding, expiry, scopes and readiness of McpCredential arg
// (NAMESPACE/NAME); it reads only the target Secret's metadata, never a value.
func clusterAuthStatus(ctx context.Context, env *cliEnv, kube *kubeFlags, arg, format string) error {
	nn, err := parseNSName(arg)
	if err != nil {
		return usagef("auth status: --secret: %v", err)
	}
	kc, err := kube.client(env)
	if err != nil {
		return err
	}
	st, err := oauthk8s.Describe(ctx, kc, nn.Namespace, nn.Name)
	if err != nil {
		return err
	}
	if ok, err := writeStructured(env.stdout, format, st); ok {
		return err
	}
	expiry := "unknown"
	if st.Expiry != nil {
		expiry = st.Expiry.Format(time.RFC3339)
	}
	ready := "False"
	if st.Ready {
		ready = "True"
	}
	w := env.stdout
	fmt.Fprintf(w, "McpCredential:  %s/%s\n", st.Namespace, safeText(st.Name))
	fmt.Fprintf(w, "Resource:       %s\n", safeText(st.Resource))
	fmt.Fprintf(w, "Issuer:         %s\n", safeText(st.Issuer))
	fmt.Fprintf(w, "Grant:          %s\n", safeText(st.Grant))
	fmt.Fprintf(w, "Target Secret:  %s\n", safeText(st.TargetSecret))
	fmt.Fprintf(w, "Scopes:         %s\n", safeText(strings.Join(st.Scopes, " ")))
	if len(st.MissingScopes) > 0 {
		fmt.Fprintf(w, "Missing scopes: %s\n", safeText(strings.Join(st.MissingScopes, " ")))
	}
	fmt.Fprintf(w, "Expiry:         %s\n", expiry)
	fmt.Fprintf(w, "Ready:          %s (%s)\n", ready, safeText(st.Reason))
	if st.Message != "" {
		fmt.Fprintf(w, "Message:        %s\n", safeText(st.Message))
	}
	return nil
}
