package main

import (
	"context"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/b10x/connector-mcp/mcpclient"
	"github.com/b10x/connector-mcp/snapshot"
)

// mcpClient is the process's MCP client; it caches the negotiated era per server configuration.
var mcpClient = mcpclient.NewClient(&mcpclient.Options{Name: "mcpctl", Version: cliVersion()})

// serverFlags name one MCP server for the verbs that reach one (discover, snapshot, call,
// profile check): --url URL (Streamable HTTP) or -- CMD ARGS... (stdio, argv only, never a shell),
// --inherit-env NAME (repeatable), one flag per bound, --timeout, --probe-timeout and --oauth-timeout, the
// egress flags and --bearer-file. For HTTP servers, either the static bearer of --bearer-file or
// the OAuth credentials stored by "mcpctl login" are presented, never both.
type serverFlags struct {
	url        string
	inheritEnv []string
	bearerFile string
	limits     mcpclient.Limits
	egress     egressFlags
	// watchToolList asks the session to report notifications/tools/list_changed (serve).
	watchToolList bool
}

// serverUse is how far a verb goes with its server, so that its help shows only the bounds it
// applies: negotiation only (discover), listing the tools (snapshot, profile check), or calling
// them too (call, serve).
type serverUse int

const (
	useNegotiate serverUse = iota
	useList
	useCall
)

// newServerFlags registers the server-selection flags on fs, with the bounds of use (default:
// useCall, every bound). A bound the verb never applies is not a flag of it, so its help does
// not list it and giving it is a usage error.
func newServerFlags(fs *pflag.FlagSet, uses ...serverUse) *serverFlags {
	use := useCall
	if len(uses) > 0 {
		use = uses[0]
	}
	f := &serverFlags{limits: mcpclient.Limits{
		MaxDescriptorBytes: mcpclient.DefaultMaxDescriptorBytes, MaxPages: mcpclient.DefaultMaxPages, MaxTools: mcpclient.DefaultMaxTools,
		MaxArgumentBytes: mcpclient.DefaultMaxArgumentBytes, MaxResultBytes: mcpclient.DefaultMaxResultBytes,
	}}
	fs.StringVar(&f.url, "url", "", "Streamable HTTP endpoint of the server (https, or http to loopback)")
	fs.StringArrayVar(&f.inheritEnv, "inherit-env", nil, "environment variable passed to a stdio server (repeatable); nothing else is passed")
	fs.StringVar(&f.bearerFile, "bearer-file", "", "file holding a static bearer token for --url (https or loopback only); the OAuth store is then not used")
	l := &f.limits
	fs.IntVar(&l.MaxFrameBytes, "max-frame-bytes", mcpclient.DefaultMaxFrameBytes, "bound on one stdio line, HTTP body or SSE event")
	if use >= useList {
		fs.IntVar(&l.MaxDescriptorBytes, "max-descriptor-bytes", mcpclient.DefaultMaxDescriptorBytes, "bound on one tool descriptor")
		fs.IntVar(&l.MaxPages, "max-pages", mcpclient.DefaultMaxPages, "bound on tools/list pages")
		fs.IntVar(&l.MaxTools, "max-tools", mcpclient.DefaultMaxTools, "bound on the number of tools")
	}
	if use >= useCall {
		fs.IntVar(&l.MaxArgumentBytes, "max-argument-bytes", mcpclient.DefaultMaxArgumentBytes, "bound on call arguments")
		fs.IntVar(&l.MaxResultBytes, "max-result-bytes", mcpclient.DefaultMaxResultBytes, "bound on a call result")
	}
	fs.DurationVar(&l.CallTimeout, "timeout", mcpclient.DefaultCallTimeout, "deadline of each operation (connect, listing, call)")
	fs.DurationVar(&l.ProbeTimeout, "probe-timeout", mcpclient.DefaultProbeTimeout, "deadline of protocol negotiation before the legacy fallback")
	fs.DurationVar(&l.OAuthTimeout, "oauth-timeout", mcpclient.DefaultOAuthTimeout, "deadline of an OAuth authorization the server asks for (discovery, registration, token exchange, refresh); the operation's deadline is paused meanwhile")
	f.egress.register(fs)
	return f
}

// config builds the server configuration from the parsed flags: args are the command's
// positional arguments and dash the index of "--" in them (-1 when absent).
func (f *serverFlags) config(ctx context.Context, env *cliEnv, args []string, dash int) (mcpclient.ServerConfig, error) {
	var cfg mcpclient.ServerConfig
	var argv []string
	if dash >= 0 {
		if dash > 0 {
			return cfg, usagef("unexpected argument %q before --", args[0])
		}
		argv = args[dash:]
	} else if len(args) > 0 {
		return cfg, usagef("unexpected argument %q (a stdio server goes after --)", args[0])
	}
	for name, v := range map[string]int{"--max-frame-bytes": f.limits.MaxFrameBytes, "--max-descriptor-bytes": f.limits.MaxDescriptorBytes,
		"--max-pages": f.limits.MaxPages, "--max-tools": f.limits.MaxTools, "--max-argument-bytes": f.limits.MaxArgumentBytes, "--max-result-bytes": f.limits.MaxResultBytes} {
		if v <= 0 {
			return cfg, usagef("%s must be positive", name)
		}
	}
	if f.limits.CallTimeout <= 0 || f.limits.ProbeTimeout <= 0 || f.limits.OAuthTimeout <= 0 {
		return cfg, usagef("--timeout, --probe-timeout and --oauth-timeout must be positive")
	}
	cfg.Limits = f.limits
	cfg.WatchToolListChanged = f.watchToolList
	switch {
	case f.url != "" && len(argv) > 0:
		return cfg, usagef("give either --url or -- CMD ARGS..., not both")
	case f.url != "":
		if len(f.inheritEnv) > 0 {
			return cfg, usagef("--inherit-env applies to stdio servers only")
		}
		u, err := parseServerURL(f.url)
		if err != nil {
			return cfg, err
		}
		hc, err := f.egress.httpClient(u)
		if err != nil {
			return cfg, err
		}
		var oh auth.OAuthHandler
		if f.bearerFile != "" {
			// The static bearer is the only credential of this request: the OAuth store is
			// neither read nor refreshed nor written.
			token, err := readBearerFile(f.bearerFile)
			if err != nil {
				return cfg, err
			}
			oh = &staticBearer{token: token}
			if hc == nil {
				hc = bearerHTTPClient()
			}
		} else if oh, err = oauthHandlerFor(ctx, env, f.url); err != nil {
			return cfg, err
		}
		cfg.HTTP = &mcpclient.HTTPServer{URL: f.url, HTTPClient: hc, OAuthHandler: oh}
	case len(argv) > 0:
		if f.bearerFile != "" {
			return cfg, usagef("--bearer-file applies to --url servers only")
		}
		cfg.Stdio = &mcpclient.StdioServer{Argv: argv, InheritEnv: f.inheritEnv, LookupEnv: func(k string) (string, bool) {
			v := env.getenv(k)
			return v, v != ""
		}}
	default:
		return cfg, usagef("name the server: --url URL or -- CMD ARGS...")
	}
	return cfg, nil
}

// connect connects to the named server and reports the negotiated era on stderr; cmd and args
// are the running command and its positional arguments.
func (f *serverFlags) connect(ctx context.Context, env *cliEnv, cmd *cobra.Command, args []string) (*mcpclient.Session, error) {
	if cmd.Flags().Changed("bearer-file") && f.bearerFile == "" {
		return nil, usagef("--bearer-file: name a file")
	}
	cfg, err := f.config(ctx, env, args, cmd.ArgsLenAtDash())
	if err != nil {
		return nil, err
	}
	start := time.Now()
	s, err := mcpClient.Connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(env.stderr, "connected: protocol %s in %s\n", s.ProtocolVersion(), time.Since(start).Round(time.Millisecond))
	return s, nil
}

// liveSnapshot connects to the named server and freezes its tools into a snapshot.
func (f *serverFlags) liveSnapshot(ctx context.Context, env *cliEnv, cmd *cobra.Command, args []string) (*snapshot.ToolSnapshot, error) {
	s, err := f.connect(ctx, env, cmd, args)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return s.ListTools(ctx)
}
