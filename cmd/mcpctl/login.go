package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/oauthk8s"
	"github.com/b10x/connector-mcp/mcpclient"
	"github.com/b10x/connector-mcp/mcpclient/oauth"
)

func init() { register(newLoginCmd) }

// credentialView is the JSON form of a stored credential: never a token or secret value.
type credentialView struct {
	Resource    string     `json:"resource"`
	Issuer      string     `json:"issuer"`
	Audience    string     `json:"audience,omitempty"`
	ClientID    string     `json:"client_id"`
	Scopes      []string   `json:"scopes"`
	Expiry      *time.Time `json:"expiry,omitempty"`
	Expired     bool       `json:"expired"`
	Refreshable bool       `json:"refreshable"`
	Updated     time.Time  `json:"updated"`
}

func viewOf(c *oauth.Credential, now time.Time) credentialView {
	v := credentialView{
		Resource: c.Resource, Issuer: c.Issuer, Audience: c.Audience, ClientID: c.ClientID,
		Scopes: c.Scopes, Refreshable: c.RefreshToken != "", Updated: c.Updated,
	}
	if v.Scopes == nil {
		v.Scopes = []string{}
	}
	if !c.Expiry.IsZero() {
		e := c.Expiry.UTC()
		v.Expiry = &e
		v.Expired = now.After(c.Expiry)
	}
	return v
}

func newLoginCmd(env *cliEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "login --url URL [--to-secret NAMESPACE/NAME]",
		Short: "Authorize mcpctl for an OAuth-protected MCP server; the token is kept in XDG state, or handed to the cluster's OAuth producer with --to-secret",
		Args:  cobra.ArbitraryArgs,
	}
	fs := cmd.Flags()
	var f loginFlags
	f.kube = addKubeFlags(cmd, false)
	fs.StringVar(&f.toSecret, "to-secret", "", "write the grant into the cluster (kubeconfig) as McpCredential NAMESPACE/NAME, whose access token the manager keeps fresh in Secret NAMESPACE/NAME; nothing is kept locally")
	fs.StringVar(&f.serverURL, "url", "", "MCP server URL (Streamable HTTP)")
	fs.StringVar(&f.clientID, "client-id", "", "pre-registered OAuth client id (preferred over the others)")
	fs.StringVar(&f.secretEnv, "client-secret-env", "", "name of the environment variable holding the pre-registered client's secret")
	fs.StringVar(&f.metadataURL, "client-metadata-url", "", "Client ID Metadata Document URL (https), used when the authorization server supports it")
	fs.StringArrayVar(&f.scopes, "scope", nil, "scope to request in addition to those the server asks for (repeatable)")
	fs.DurationVar(&f.timeout, "timeout", mcpclient.DefaultLoginTimeout, "how long to wait for the authorization in the browser")
	fs.BoolVar(&f.noBrowser, "no-browser", false, "only print the authorization URL, do not try to open a browser")
	cmd.RunE = action(func(cmd *cobra.Command, args []string) error {
		return login(cmd.Context(), env, args, f)
	})
	return cmd
}

// loginFlags are the parsed flags of "mcpctl login".
type loginFlags struct {
	serverURL, clientID, secretEnv, metadataURL string
	scopes                                      []string
	timeout                                     time.Duration
	noBrowser                                   bool
	// toSecret is NAMESPACE/NAME of --to-secret; kube locates the cluster.
	toSecret string
	kube     *kubeFlags
}

// login runs "mcpctl login".
func login(ctx context.Context, env *cliEnv, args []string, f loginFlags) error {
	serverURL, clientID, secretEnv, metadataURL := f.serverURL, f.clientID, f.secretEnv, f.metadataURL
	scopes, timeout, noBrowser := f.scopes, f.timeout, f.noBrowser
	switch {
	case serverURL == "":
		return usagef("login: --url is required")
	case len(args) > 0:
		return usagef("login: unexpected arguments %q", args)
	case clientID != "" && metadataURL != "":
		return usagef("login: --client-id and --client-metadata-url are exclusive")
	case secretEnv != "" && clientID == "":
		return usagef("login: --client-secret-env needs --client-id")
	case timeout <= 0:
		return usagef("login: --timeout must be positive")
	}
	if _, err := oauth.CanonicalResource(serverURL); err != nil {
		return usagef("login: --url must be an http(s) URL without user information")
	}
	var secret string
	if secretEnv != "" {
		if secret = env.getenv(secretEnv); secret == "" {
			return usagef("login: environment variable %s is empty", secretEnv)
		}
	}
	var store oauth.Store
	var target types.NamespacedName
	if f.toSecret != "" {
		t, err := parseNSName(f.toSecret)
		if err != nil {
			return usagef("login: --to-secret: %v", err)
		}
		target = t
		// The grant goes to the cluster only: nothing is kept on this machine.
		store = oauth.NewMemoryStore()
	} else {
		xdg, err := oauthStore(env)
		if err != nil {
			return err
		}
		store = xdg
	}
	client, err := oauthHTTPClient(serverURL)
	if err != nil {
		return err
	}
	lb, err := oauth.ListenLoopback(ctx)
	if err != nil {
		return err
	}
	defer lb.Close()
	open := func(authURL string) error {
		fmt.Fprintf(env.stderr, "Open this URL in a browser to authorize mcpctl:\n\n  %s\n\n", authURL)
		if !noBrowser {
			openBrowser(env, authURL)
		}
		return nil
	}
	h, err := oauth.NewHandler(oauth.Options{
		ServerURL: serverURL, Store: store, HTTPClient: client,
		ClientID: clientID, ClientSecret: secret, ClientMetadataURL: metadataURL,
		ClientName: "mcpctl", Scopes: scopes,
		RedirectURL: lb.URL(), Fetcher: lb.Fetcher(open, env.stderr, timeout),
	})
	if err != nil {
		return usagef("login: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout+time.Minute)
	defer cancel()
	fmt.Fprintf(env.stderr, "Contacting %s...\n", h.Resource())
	cred, err := h.Login(ctx)
	if err != nil {
		return err
	}
	if f.toSecret == "" {
		fmt.Fprintf(env.stderr, "Logged in: %v (stored under %s)\n", cred, store.(*oauth.XDGStore).Dir())
		return writeJSON(env.stdout, viewOf(cred, time.Now()))
	}
	kc, err := f.kube.client(env)
	if err != nil {
		return err
	}
	reg := apiv1.RegistrationDynamic
	switch {
	case clientID != "":
		reg = apiv1.RegistrationPreregistered
	case metadataURL != "" && cred.ClientID == metadataURL:
		reg = apiv1.RegistrationClientIDMetadataDocument
	}
	if err := oauthk8s.Apply(ctx, kc, target.Namespace, target.Name, cred, reg, scopes); err != nil {
		return err
	}
	fmt.Fprintf(env.stderr, "Logged in: %v (handed to McpCredential %s; the manager writes the access token into Secret %s)\n", cred, target, target)
	return writeJSON(env.stdout, map[string]any{"credential": viewOf(cred, time.Now()), "mcpCredential": target.String(), "secret": target.String()})
}
