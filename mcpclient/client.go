package mcpclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/b10x/connector-mcp/internal/lru"
	"github.com/b10x/connector-mcp/internal/netcause"
	"github.com/b10x/connector-mcp/refusal"
	"github.com/b10x/connector-mcp/snapshot"
)

// Client connects to MCP servers and remembers the negotiated era of each server configuration
// in a bounded LRU cache (Options.MaxCachedEras). It is safe for concurrent use; one Client per
// process is typical.
type Client struct {
	impl mcp.Implementation
	eras *lru.Cache[string, Era]
}

// defaultMaxCachedEras is the default Options.MaxCachedEras.
const defaultMaxCachedEras = 1024

// Options configure a Client.
type Options struct {
	// Name and Version identify this client to servers (clientInfo). Defaults: "connector-mcp",
	// "v0.1".
	Name, Version string
	// MaxCachedEras bounds how many server configurations' negotiated eras are remembered; past
	// it the least recently used is forgotten and its next Connect negotiates again. Zero or
	// negative: 1024.
	MaxCachedEras int
}

// NewClient returns a Client. opts may be nil.
func NewClient(opts *Options) *Client {
	c := &Client{impl: mcp.Implementation{Name: "connector-mcp", Version: "v0.1"}}
	size := defaultMaxCachedEras
	if opts != nil {
		if opts.Name != "" {
			c.impl.Name = opts.Name
		}
		if opts.Version != "" {
			c.impl.Version = opts.Version
		}
		if opts.MaxCachedEras > 0 {
			size = opts.MaxCachedEras
		}
	}
	c.eras = lru.New[string, Era](size)
	return c
}

// CachedEra returns the era remembered for cfg, if any.
func (c *Client) CachedEra(cfg ServerConfig) (Era, bool) { return c.eras.Get(cfg.key()) }

// ForgetEra drops the era remembered for cfg, so the next Connect negotiates again.
func (c *Client) ForgetEra(cfg ServerConfig) { c.eras.Remove(cfg.key()) }

func (c *Client) remember(cfg ServerConfig, e Era) { c.eras.Add(cfg.key(), e) }

// Connect connects to the server named by cfg and negotiates the protocol era.
//
// With no era cached for cfg, it probes: server/discover at 2026-07-28, falling back to initialize
// at 2025-11-25 on a recognised non-modern answer, all within Limits.ProbeTimeout. Over stdio, if
// the probe times out or the process exits (a server that ignores or exits on server/discover,
// go-sdk #1177), it connects again in a fresh process with initialize at 2025-11-25, within
// Limits.CallTimeout. Over HTTP a transport failure of the probe (no HTTP answer, a 408/429/5xx
// error page, the probe deadline) is not a verdict: Connect fails with it and caches nothing.
// The era that worked is cached for cfg.
func (c *Client) Connect(ctx context.Context, cfg ServerConfig) (*Session, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.Limits = cfg.Limits.withDefaults()
	if era, ok := c.CachedEra(cfg); ok {
		s, err := c.open(ctx, cfg, era, false)
		if err != nil {
			// The server may have changed: negotiate afresh next time.
			c.ForgetEra(cfg)
			return nil, err
		}
		c.remember(cfg, s.era) // a modern attempt may have fallen back to initialize
		return s, nil
	}
	s, err := c.open(ctx, cfg, "", true)
	if err == nil {
		c.remember(cfg, s.era)
		return s, nil
	}
	if !fallbackWorthy(cfg, err) {
		return nil, err
	}
	s, lerr := c.open(ctx, cfg, EraLegacy, false)
	if lerr != nil {
		var r *RefusalError
		if errors.As(err, &r) && r.Name == RefusalProbeTimeout && !errors.As(lerr, new(*RefusalError)) {
			return nil, err
		}
		return nil, lerr
	}
	c.remember(cfg, EraLegacy)
	return s, nil
}

// fallbackWorthy reports whether a failed probe may be retried with initialize on a fresh
// connection. Only over stdio: the probe timed out or the process exited (a server that ignores
// or exits on server/discover, go-sdk #1177). Over HTTP the SDK falls back within the probe on a
// recognised non-modern answer; what is left is a transport failure (no answer, an error page,
// the probe deadline) and is not a verdict on the era. A recognised answer (a JSON-RPC error, an
// HTTP status, a refusal other than the probe deadline) is final everywhere.
func fallbackWorthy(cfg ServerConfig, err error) bool {
	if cfg.Stdio == nil {
		return false
	}
	var r *RefusalError
	if errors.As(err, &r) {
		return r.Name == RefusalProbeTimeout
	}
	return errors.Is(err, ErrConnectionClosed)
}

// open starts one connection. era "" probes (SDK default: discover with fallback to initialize).
func (c *Client) open(ctx context.Context, cfg ServerConfig, era Era, probe bool) (*Session, error) {
	s := &Session{cfg: cfg, lim: cfg.Limits, reg: &registry{}, listChanged: make(chan struct{}, 1), pages: map[string][]byte{}}
	copts := &mcp.ClientOptions{
		Capabilities:   &mcp.ClientCapabilities{},
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	}
	if cfg.WatchToolListChanged {
		copts.ToolListChangedHandler = s.onToolListChanged
	}
	client := mcp.NewClient(&c.impl, copts)
	client.AddReceivingMiddleware(s.refuseServerRequests)

	var transport mcp.Transport
	var st *stdioTransport
	if cfg.Stdio != nil {
		st = &stdioTransport{cfg: cfg.Stdio, lim: s.lim, reg: s.reg}
		transport = st
	} else {
		hc := boundClient(cfg.HTTP.HTTPClient, s.reg, s.lim.MaxFrameBytes)
		if cfg.HTTP.OAuthHandler == nil && !cfg.WatchToolListChanged {
			s.hc = hc // the direct tools/call path shares it (direct.go)
		}
		var oh auth.OAuthHandler
		if cfg.HTTP.OAuthHandler != nil {
			oh = &timedAuthorizer{inner: cfg.HTTP.OAuthHandler, lim: s.lim}
		}
		transport = &mcp.StreamableClientTransport{
			Endpoint:             cfg.HTTP.URL,
			HTTPClient:           hc,
			OAuthHandler:         oh,
			MaxRetries:           2, // bounded resumption of an interrupted SSE response
			DisableStandaloneSSE: !cfg.WatchToolListChanged,
			MaxEventSize:         s.lim.MaxFrameBytes + 1<<16,
		}
	}

	timeout, cause := s.lim.CallTimeout, refuse(RefusalCallTimeout, "connect", s.lim.CallTimeout.Milliseconds(), ErrCallTimeout)
	if probe {
		timeout, cause = s.lim.ProbeTimeout, refuse(RefusalProbeTimeout, "connect", s.lim.ProbeTimeout.Milliseconds(), ErrProbeTimeout)
	}
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	tctx, clock, stop := withClock(cctx, timeout, cause)
	defer stop()
	state := &callState{op: "connect", cancel: cancel, clock: clock, guardDiscover: cfg.HTTP != nil && era != EraLegacy}
	s.reg.track(state)
	defer s.reg.untrack(state)
	tctx = context.WithValue(tctx, callKey{}, state)

	var sopts *mcp.ClientSessionOptions
	if era == EraLegacy {
		sopts = &mcp.ClientSessionOptions{ProtocolVersion: string(EraLegacy)}
	}
	cs, err := client.Connect(tctx, transport, sopts)
	if st != nil {
		s.proc = st.proc
	}
	if err != nil {
		if s.proc != nil {
			s.proc.kill()
		}
		if unsupportedOnly(state) {
			return nil, refuse(RefusalUnsupportedProtocol, "connect", 0, ErrUnsupportedProtocol)
		}
		return nil, s.outcomeErr("connect", tctx, state, err)
	}
	s.cs = cs
	res := cs.InitializeResult()
	if res == nil {
		_ = s.Close()
		return nil, refuse(RefusalInvalidResponse, "connect", 0, ErrInvalidResponse)
	}
	s.proto = res.ProtocolVersion
	switch {
	case s.proto >= string(EraModern):
		s.era = EraModern
	case s.proto != "":
		s.era = EraLegacy
	default:
		_ = s.Close()
		return nil, refuse(RefusalUnsupportedProtocol, "connect", 0, ErrUnsupportedProtocol)
	}
	if s.hc != nil && s.era == EraModern {
		if s.meta, err = requestMeta(s.proto, &c.impl); err != nil {
			s.hc = nil
		}
	}
	if res.ServerInfo != nil {
		s.server = snapshot.ServerInfo{Name: res.ServerInfo.Name, Title: res.ServerInfo.Title, Version: res.ServerInfo.Version}
	}
	return s, nil
}

// maxRedirects bounds redirects followed by the default HTTP client.
const maxRedirects = 5

// boundClient returns a copy of hc (or of a default client without environment proxies) whose
// transport is wrapped by boundTransport.
func boundClient(hc *http.Client, reg *registry, frame int) *http.Client {
	var c http.Client
	if hc != nil {
		c = *hc
	}
	base := c.Transport
	if base == nil {
		if hc != nil {
			base = http.DefaultTransport
		} else {
			t := http.DefaultTransport.(*http.Transport).Clone()
			t.Proxy = nil
			base = t
		}
	}
	if hc == nil {
		// The default client re-checks every redirect as a configured URL would be checked.
		c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects {
				return refuse(RefusalTooManyRedirects, "redirect", maxRedirects, ErrInsecureTransport)
			}
			return checkURL(req.URL.String())
		}
	}
	c.Transport = &boundTransport{base: base, reg: reg, frame: frame}
	return &c
}

// outcomeErr maps a failed SDK operation to this package's errors, never passing SDK or server
// text through: the request's own refusal cause first, then a session fault, then what was
// observed below the SDK.
func (s *Session) outcomeErr(op string, ctx context.Context, st *callState, err error) error {
	var fr *FeatureRefusedError
	var pf *probeFailure
	if errors.As(context.Cause(ctx), &pf) {
		// The server/discover exchange got no answer (see probeFailure): explain it by what was
		// observed there, not by the SDK's fallback attempt that the cancellation cut short.
		if pf.status != 0 {
			return &TransportError{Op: op, Status: pf.status, Err: ErrHTTPStatus}
		}
		perr := s.outcomeErr(op, context.Background(), nil, pf.err)
		var te *TransportError
		if errors.As(perr, &te) && errors.Is(te.Err, ErrConnectionClosed) {
			return &TransportError{Op: op, Err: ErrExchangeFailed, Cause: netcause.Of(pf.err)} // no HTTP response at all
		}
		return perr
	} else if cause := context.Cause(ctx); cause != nil {
		if errors.As(cause, &fr) {
			return &FeatureRefusedError{Feature: fr.Feature, Op: op}
		}
		var r *RefusalError
		if errors.As(cause, &r) {
			cp := *r
			if cp.Op == "" {
				cp.Op = op
			}
			return &cp
		}
	}
	if f := s.reg.sessionFault(); f != nil {
		if errors.As(f, &fr) {
			return &FeatureRefusedError{Feature: fr.Feature, Op: op}
		}
		var r *RefusalError
		if errors.As(f, &r) {
			cp := *r
			cp.Op = op
			return &cp
		}
	}
	if ctx.Err() != nil && context.Cause(ctx) != nil && errors.Is(context.Cause(ctx), context.Canceled) {
		return context.Canceled
	}
	// A named refusal from a collaborator below the SDK (the egress transport, the OAuth handler)
	// surfaces as itself, without the SDK's wrapping text.
	if named, ok := refusal.As(err); ok {
		return named
	}
	if st != nil {
		st.mu.Lock()
		rpcErr, code, status := st.rpcErr, st.rpcCode, st.status
		insufficient, scopes := st.insufficientScope, st.scopes
		st.mu.Unlock()
		if rpcErr {
			return &ServerError{Op: op, Code: code}
		}
		if status == http.StatusForbidden && insufficient {
			return &TransportError{Op: op, Status: status, Err: ErrInsufficientScope, Scopes: scopes}
		}
		if status == http.StatusUnauthorized {
			return &TransportError{Op: op, Status: status, Err: ErrUnauthorized}
		}
		if status >= 300 {
			return &TransportError{Op: op, Status: status, Err: ErrHTTPStatus}
		}
	}
	var certErr *tls.CertificateVerificationError
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	if errors.As(err, &certErr) || errors.As(err, &unknownAuthority) || errors.As(err, &hostname) {
		return &TransportError{Op: op, Err: ErrTLS}
	}
	var uerr *url.Error
	if errors.As(err, &uerr) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return &TransportError{Op: op, Err: ErrExchangeFailed, Cause: netcause.Of(err)}
	}
	// A JSON-RPC error the server sent was recorded below the SDK (above); the SDK's own
	// transport marker (-32005, rejected by transport) is not a server answer.
	var werr *jsonrpc.Error
	if errors.As(err, &werr) && werr.Code != -32005 {
		return &ServerError{Op: op, Code: werr.Code}
	}
	if errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, os.ErrClosed) || (s.proc != nil && s.proc.hasExited()) || strings.Contains(err.Error(), "closed") {
		return &TransportError{Op: op, Err: ErrConnectionClosed}
	}
	var te *TransportError
	if errors.As(err, &te) {
		return te
	}
	return &TransportError{Op: op, Err: ErrConnectionClosed}
}

// unsupportedOnly reports whether the server's first answer was a recognised modern error
// (-32022, unsupported protocol version) listing no revision this client speaks.
func unsupportedOnly(st *callState) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.rpcErr || st.rpcCode != mcp.CodeUnsupportedProtocolVersion {
		return false
	}
	var d struct {
		Supported []string `json:"supported"`
	}
	if snapshot.Unmarshal(st.rpcData, &d) != nil {
		return false
	}
	for _, v := range d.Supported {
		if v == string(EraModern) || v == string(EraLegacy) {
			return false
		}
	}
	return true
}
