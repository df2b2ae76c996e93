package mcpclient

import (
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/b10x/connector-mcp/internal/wire"
)

// Era is the protocol generation a server speaks.
type Era string

const (
	// EraModern is protocol revision 2026-07-28: stateless, negotiated by server/discover, with
	// per-request _meta.
	EraModern Era = wire.ProtocolModern
	// EraLegacy is protocol revision 2025-11-25: negotiated by initialize.
	EraLegacy Era = wire.ProtocolLegacy
)

// Default bounds. Every bound is a named refusal when exceeded.
const (
	DefaultMaxFrameBytes      = 8 << 20 // one stdio line, HTTP JSON body or SSE event
	DefaultMaxDescriptorBytes = 64 << 10
	DefaultMaxPages           = 100
	DefaultMaxTools           = 2000
	DefaultMaxArgumentBytes   = 1 << 20
	DefaultMaxResultBytes     = 4 << 20
	defaultMaxStderrBytes     = 64 << 10
	DefaultProbeTimeout       = 5 * time.Second
	DefaultCallTimeout        = 60 * time.Second
	DefaultOAuthTimeout       = 30 * time.Second
	DefaultLoginTimeout       = 5 * time.Minute
)

// Limits are the bounds applied to one server. A zero field selects its default; there is no
// "unlimited".
type Limits struct {
	// MaxFrameBytes bounds one inbound message: a stdio line, an HTTP JSON body or one SSE event
	// (refusal "frame_too_large").
	MaxFrameBytes int
	// MaxDescriptorBytes bounds one raw tool descriptor (refusal "descriptor_too_large").
	MaxDescriptorBytes int
	// MaxPages bounds tools/list pages (refusal "too_many_pages"); a cursor seen twice is refused
	// as "repeated_cursor".
	MaxPages int
	// MaxTools bounds the number of tools in one listing (refusal "too_many_tools").
	MaxTools int
	// MaxArgumentBytes bounds the raw arguments of one call (refusal "argument_too_large").
	MaxArgumentBytes int
	// MaxResultBytes bounds one raw tools/call result (refusal "result_too_large").
	MaxResultBytes int
	// MaxStderrBytes bounds the captured stderr of a stdio server; the rest is dropped.
	MaxStderrBytes int
	// ProbeTimeout bounds protocol negotiation (server/discover with fallback) before the legacy
	// attempt in a fresh stdio process (refusal "probe_timeout"; over HTTP the refusal is final).
	// It counts the negotiation exchanges only: an OAuth authorization the server asks for on the
	// way runs under OAuthTimeout and LoginTimeout, with this deadline paused.
	ProbeTimeout time.Duration
	// CallTimeout bounds each operation: a connect with a known era, a complete listing, one call
	// (refusal "call_timeout"). Like ProbeTimeout, it is paused while an authorization runs.
	CallTimeout time.Duration
	// OAuthTimeout bounds one authorization that HTTPServer.OAuthHandler runs when the server
	// answers 401 or 403 insufficient_scope: metadata discovery, client registration, token
	// exchange and refresh together (refusal "oauth_timeout"). The interactive part, when the
	// handler marks it (package mcpclient/oauth does, around its Fetcher), does not count.
	OAuthTimeout time.Duration
	// LoginTimeout bounds the interactive part of such an authorization: the user completing it
	// in a browser (refusal "login_timeout"). OAuthTimeout is paused meanwhile.
	LoginTimeout time.Duration
}

func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MaxFrameBytes, DefaultMaxFrameBytes)
	def(&l.MaxDescriptorBytes, DefaultMaxDescriptorBytes)
	def(&l.MaxPages, DefaultMaxPages)
	def(&l.MaxTools, DefaultMaxTools)
	def(&l.MaxArgumentBytes, DefaultMaxArgumentBytes)
	def(&l.MaxResultBytes, DefaultMaxResultBytes)
	def(&l.MaxStderrBytes, defaultMaxStderrBytes)
	if l.ProbeTimeout <= 0 {
		l.ProbeTimeout = DefaultProbeTimeout
	}
	if l.CallTimeout <= 0 {
		l.CallTimeout = DefaultCallTimeout
	}
	if l.OAuthTimeout <= 0 {
		l.OAuthTimeout = DefaultOAuthTimeout
	}
	if l.LoginTimeout <= 0 {
		l.LoginTimeout = DefaultLoginTimeout
	}
	return l
}

// ServerConfig names one MCP server. Exactly one of HTTP and Stdio is set. The configuration names
// credential sources (inherited variable names, an OAuth handler, an HTTP client), never values.
type ServerConfig struct {
	// HTTP selects a Streamable HTTP server.
	HTTP *HTTPServer
	// Stdio selects a server started as a child process speaking over stdin/stdout.
	Stdio *StdioServer
	// Limits are the bounds for this server (zero fields take defaults).
	Limits Limits
	// WatchToolListChanged asks for notifications/tools/list_changed (legacy HTTP: the optional
	// GET stream; modern: subscriptions/listen). Delivered on Session.ToolListChanged. Off by
	// default, so no long-lived stream is opened.
	WatchToolListChanged bool
}

// HTTPServer is a Streamable HTTP server endpoint.
type HTTPServer struct {
	// URL is the MCP endpoint. https is required, except for loopback hosts (127.0.0.0/8, ::1,
	// localhost). It must not carry userinfo.
	URL string
	// HTTPClient carries every exchange (e.g. an egress-policy client). Nil means a client with no
	// proxy from the environment. Its Transport is wrapped, never replaced: response bodies are
	// bounded and inspected below the MCP SDK.
	HTTPClient *http.Client
	// OAuthHandler, when set, authorizes requests (see package mcpclient/oauth).
	OAuthHandler auth.OAuthHandler
}

// StdioServer is a server started as a child process: argv only, never a shell.
type StdioServer struct {
	// Argv is the program and its arguments. Argv[0] is resolved with exec.LookPath.
	Argv []string
	// InheritEnv names the environment variables passed to the child. The child environment is
	// exactly these variables (those that are set), nothing else.
	InheritEnv []string
	// Dir is the child's working directory (empty: the current directory).
	Dir string
	// LookupEnv reads the parent environment; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
}

// key identifies the server for the era cache.
func (c ServerConfig) key() string {
	switch {
	case c.HTTP != nil:
		return "http\x00" + c.HTTP.URL
	case c.Stdio != nil:
		return "stdio\x00" + strings.Join(c.Stdio.Argv, "\x00") + "\x01" + strings.Join(c.Stdio.InheritEnv, "\x00") + "\x01" + c.Stdio.Dir
	}
	return ""
}

// validate checks the configuration; HTTP URL problems are named refusals.
func (c ServerConfig) validate() error {
	if (c.HTTP == nil) == (c.Stdio == nil) {
		return &TransportError{Op: "config", Err: ErrInvalidConfig}
	}
	if c.Stdio != nil {
		if len(c.Stdio.Argv) == 0 || c.Stdio.Argv[0] == "" {
			return &TransportError{Op: "config", Err: ErrInvalidConfig}
		}
		return nil
	}
	return checkURL(c.HTTP.URL)
}

// checkURL requires https (or http to a loopback host) and no userinfo.
func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return &TransportError{Op: "config", Err: ErrInvalidConfig}
	}
	if u.User != nil {
		return refuse(RefusalCredentialsInURL, "config", 0, ErrCredentialsInURL)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if isLoopback(u.Hostname()) {
			return nil
		}
	}
	return refuse(RefusalInsecureTransport, "config", 0, ErrInsecureTransport)
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
