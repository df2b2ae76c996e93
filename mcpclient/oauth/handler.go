package oauth

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/b10x/connector-mcp/internal/authphase"
)

// Options configure a [Handler] for one MCP server.
type Options struct {
	// ServerURL is the MCP endpoint (Streamable HTTP); its canonical form is the resource half of
	// every credential key the handler uses. Required.
	ServerURL string
	// Store keeps credentials and client registrations. Required.
	Store Store

	// ClientID selects a pre-registered client (first preference); ClientSecret is its secret for
	// a confidential client. ClientIssuer, when set, binds the pre-registered client to one
	// authorization server: a different discovered issuer is refused.
	ClientID, ClientSecret, ClientIssuer string
	// ClientMetadataURL is a Client ID Metadata Document URL (second preference, used when the
	// authorization server supports it). It must be an https URL with a path.
	ClientMetadataURL string
	// ClientName is sent in dynamic client registration (the last resort, used when neither of
	// the above applies and the authorization server has a registration endpoint). Registrations
	// are kept in the Store per issuer and reused.
	ClientName string

	// Scopes are requested in addition to those the server challenges for or advertises.
	Scopes []string
	// RedirectURL is where the authorization server sends the browser back (for the CLI, a
	// loopback listener, see [ListenLoopback]). Required with Fetcher.
	RedirectURL string
	// Fetcher runs the interactive part of the flow (user agent to authorization endpoint and
	// back). Nil means the handler never starts an authorization: it only presents and refreshes
	// stored credentials, and answers a needed authorization with a [*LoginRequiredError].
	Fetcher auth.AuthorizationCodeFetcher

	// HTTPClient carries the probe, metadata, registration, token and refresh requests.
	// Required: the package owns no socket. Callers hand it the egress port's guarded client
	// (egress.NewHTTPClient with MaxResponseBytes), whose dial-time IP policy refuses private,
	// link-local, metadata and (outside development) loopback addresses, ignores the proxy
	// environment and refuses redirects; go-sdk's own discovery checks step aside for a client
	// with its own transport, so this client carries the whole policy.
	HTTPClient *http.Client
}

// Handler is an [auth.OAuthHandler] for one MCP server whose tokens live in a [Store] keyed by
// (resource, authorization-server issuer). It presents the newest stored credential for its
// resource, refreshes it at its own issuer's token endpoint (persisting the result), and on a
// 401 or a 403 insufficient_scope runs go-sdk's [auth.AuthorizationCodeHandler] for the issuer
// the resource names now, so a token is never presented to another resource nor obtained from
// an issuer other than the one it is stored under.
type Handler struct {
	opts     Options
	resource string
	client   *http.Client
	refusals *refusalRecorder

	authMu sync.Mutex // serializes authorizations

	mu      sync.Mutex
	loaded  bool
	current *storeSource
}

var _ auth.OAuthHandler = (*Handler)(nil)

// NewHandler returns a handler for opts.ServerURL.
func NewHandler(opts Options) (*Handler, error) {
	res, err := CanonicalResource(opts.ServerURL)
	if err != nil {
		return nil, err
	}
	if opts.Store == nil {
		return nil, errors.New("oauth: Options.Store is required")
	}
	if opts.Fetcher != nil && opts.RedirectURL == "" {
		return nil, errors.New("oauth: Options.RedirectURL is required with a Fetcher")
	}
	if opts.ClientMetadataURL != "" {
		u, err := url.Parse(opts.ClientMetadataURL)
		if err != nil || u.Scheme != "https" || u.Path == "" || u.Path == "/" {
			return nil, errors.New("oauth: the client metadata document URL must be an https URL with a path")
		}
	}
	if opts.ClientName == "" {
		opts.ClientName = "connector-mcp"
	}
	if opts.HTTPClient == nil {
		return nil, ErrHTTPClientRequired
	}
	h := &Handler{opts: opts, resource: res, refusals: &refusalRecorder{}}
	h.client = h.refusals.wrap(opts.HTTPClient)
	return h, nil
}

// Resource returns the canonical resource URL the handler is bound to.
func (h *Handler) Resource() string { return h.resource }

// TokenSource implements [auth.OAuthHandler]: the source of the credential in use, initially
// the most recently updated stored credential for the resource, or nil when there is none.
func (h *Handler) TokenSource(ctx context.Context) (oauth2.TokenSource, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.loaded {
		creds, err := h.opts.Store.List(ctx, h.resource)
		if err != nil {
			return nil, err
		}
		h.loaded = true
		if len(creds) > 0 {
			h.current = h.newStoreSource(creds[0])
		}
	}
	if h.current == nil {
		return nil, nil
	}
	return h.current, nil
}

// Credential returns a copy of the credential in use (nil when none); its String form is safe
// to print.
func (h *Handler) Credential() *Credential {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.current == nil {
		return nil
	}
	return h.current.snapshot()
}

func (h *Handler) use(s *storeSource) {
	h.mu.Lock()
	h.current, h.loaded = s, true
	h.mu.Unlock()
}

// Authorize implements [auth.OAuthHandler]; the transport calls it after a 401 or 403.
func (h *Handler) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	return h.authorize(ctx, req, resp, false)
}

func (h *Handler) authorize(ctx context.Context, req *http.Request, resp *http.Response, fresh bool) (err error) {
	handedOver := false
	defer func() {
		if !handedOver {
			resp.Body.Close()
		}
	}()
	if got, cerr := CanonicalResource(req.URL.String()); cerr != nil || got != h.resource {
		return &BindingError{What: "resource"}
	}
	challenges, perr := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if perr != nil {
		return &AuthorizationError{Stage: "discovery"}
	}
	stepUp := resp.StatusCode == http.StatusForbidden
	if stepUp && challengeError(challenges) != "insufficient_scope" {
		return nil // not an authorization problem: let the transport report the 403
	}
	// One authorization at a time: a request that failed with a token another request has
	// since replaced is simply retried with the new one (no second prompt).
	h.authMu.Lock()
	defer h.authMu.Unlock()
	presented, _ := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	if cur := h.Credential(); !fresh && !stepUp && cur != nil && cur.AccessToken != presented &&
		(cur.Expiry.IsZero() || time.Now().Before(cur.Expiry)) {
		return nil
	}
	h.refusals.reset()
	d, err := h.discover(ctx, challenges, req.URL.String())
	if err != nil {
		return err
	}
	key := Key{Resource: h.resource, Issuer: d.issuer}
	stored, err := h.opts.Store.Load(ctx, key)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	// Reuse or refresh a stored credential for the discovered issuer, never one whose token
	// endpoint the issuer no longer advertises.
	if !fresh && !stepUp && stored != nil && stored.TokenURL == d.asm.TokenEndpoint {
		// A credential for the discovered issuer that was not the one just rejected.
		if stored.AccessToken != presented && (stored.Expiry.IsZero() || time.Now().Before(stored.Expiry)) {
			h.use(h.newStoreSource(stored))
			return nil
		}
		// The access token was rejected before its expiry: try one refresh at its own issuer.
		if stored.RefreshToken != "" {
			src := h.newStoreSource(stored)
			_, rerr := src.refresh()
			if rerr == nil {
				h.use(src)
				return nil
			}
			var re *oauth2.RetrieveError
			if !errors.As(rerr, &re) || re.ErrorCode != "invalid_grant" {
				return rerr // the stored credential is left as it was
			}
		}
	}
	if h.opts.Fetcher == nil {
		lr := &LoginRequiredError{Resource: h.resource}
		if stepUp {
			lr.Scopes = safeScopes(challengeScopes(challenges))
		}
		return lr
	}
	earlier := slices.Clone(h.opts.Scopes)
	if stored != nil {
		earlier = union(earlier, stored.Scopes)
	}
	if cur := h.Credential(); cur != nil && cur.Key == key {
		earlier = union(earlier, cur.Scopes)
	}
	capture := &registrationCapture{}
	cfg, err := h.sdkConfig(ctx, d, earlier, capture)
	if err != nil {
		return err
	}
	var fetchErr error
	fetch := cfg.AuthorizationCodeFetcher
	cfg.AuthorizationCodeFetcher = func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
		if err := checkAuthURL(args.URL, d); err != nil {
			fetchErr = err
			return nil, err
		}
		// The wait for the user is the interactive phase: a caller bounding this authorization
		// (mcpclient's Limits.LoginTimeout) runs it under its own deadline.
		wctx, end := authphase.Interactive(ctx)
		res, err := fetch(wctx, args)
		end()
		fetchErr = err
		return res, err
	}
	sdk, err := auth.NewAuthorizationCodeHandler(cfg)
	if err != nil {
		return &AuthorizationError{Stage: "registration"}
	}
	handedOver = true
	err = sdk.Authorize(ctx, req, resp)
	// A registration made on the way is kept whether or not the rest of the flow succeeded.
	if reg := capture.result(); reg != nil {
		if serr := h.saveRegistration(ctx, d, reg); serr != nil && err == nil {
			return serr
		}
	}
	if err != nil {
		return h.sanitize(ctx, err, fetchErr)
	}
	ts, err := sdk.TokenSource(ctx)
	if err != nil {
		return &AuthorizationError{Stage: "token"}
	}
	src, ok := ts.(*storeSource)
	if !ok {
		return &AuthorizationError{Stage: "token"}
	}
	h.use(src)
	return nil
}

// sdkConfig builds the go-sdk handler configuration for one authorization at d's issuer.
func (h *Handler) sdkConfig(ctx context.Context, d *discovered, earlier []string, capture *registrationCapture) (*auth.AuthorizationCodeHandlerConfig, error) {
	cfg := &auth.AuthorizationCodeHandlerConfig{
		RedirectURL:              h.opts.RedirectURL,
		AuthorizationCodeFetcher: h.opts.Fetcher,
		RequestRefreshToken:      true,
		Client:                   h.client,
		ScopeFilter: func(discovered []string) []string {
			return union(earlier, discovered)
		},
		NewTokenSource: func(ctx context.Context, c *oauth2.Config, t *oauth2.Token) (oauth2.TokenSource, error) {
			return h.newTokenSource(ctx, d, c, t)
		},
	}
	switch {
	case h.opts.ClientID != "":
		pre := &oauthex.ClientCredentials{ClientID: h.opts.ClientID, Issuer: h.opts.ClientIssuer}
		if h.opts.ClientSecret != "" {
			pre.ClientSecretAuth = &oauthex.ClientSecretAuth{ClientSecret: h.opts.ClientSecret}
		}
		cfg.PreregisteredClient = pre
	case h.opts.ClientMetadataURL != "" && d.asm.ClientIDMetadataDocumentSupported:
		cfg.ClientIDMetadataDocumentConfig = &auth.ClientIDMetadataDocumentConfig{URL: h.opts.ClientMetadataURL}
	default:
		reg, err := h.storedRegistration(ctx, d)
		if err != nil {
			return nil, err
		}
		if reg != nil {
			pre := &oauthex.ClientCredentials{ClientID: reg.ClientID, Issuer: d.issuer}
			if reg.ClientSecret != "" {
				pre.ClientSecretAuth = &oauthex.ClientSecretAuth{ClientSecret: reg.ClientSecret}
			}
			cfg.PreregisteredClient = pre
			break
		}
		if d.asm.RegistrationEndpoint == "" {
			return nil, &AuthorizationError{Stage: "registration"}
		}
		// The SDK registers (so the registered token endpoint auth method is honoured) and the
		// capture persists the registration for the next authorization at this issuer.
		md := &oauthex.ClientRegistrationMetadata{
			RedirectURIs:  []string{h.opts.RedirectURL},
			GrantTypes:    []string{"authorization_code", "refresh_token"},
			ResponseTypes: []string{"code"},
			ClientName:    h.opts.ClientName,
		}
		cfg.DynamicClientRegistrationConfig = &auth.DynamicClientRegistrationConfig{Metadata: md}
		cfg.Client = capture.wrap(h.client, d.asm.RegistrationEndpoint)
	}
	return cfg, nil
}

// storedRegistration returns the persisted dynamic registration at d's issuer when it is still
// usable with the redirect URL, or nil.
func (h *Handler) storedRegistration(ctx context.Context, d *discovered) (*Registration, error) {
	reg, err := h.opts.Store.LoadRegistration(ctx, d.issuer)
	switch {
	case err == nil:
		if (reg.SecretExpiresAt.IsZero() || time.Now().Before(reg.SecretExpiresAt)) && redirectRegistered(reg.RedirectURIs, h.opts.RedirectURL) {
			return reg, nil
		}
		return nil, nil
	case errors.Is(err, ErrNotFound):
		return nil, nil
	default:
		return nil, err
	}
}

// saveRegistration persists a registration the SDK made during an authorization at d's issuer.
func (h *Handler) saveRegistration(ctx context.Context, d *discovered, resp *oauthex.ClientRegistrationResponse) error {
	reg := &Registration{
		Issuer:          d.issuer,
		ClientID:        resp.ClientID,
		ClientSecret:    resp.ClientSecret,
		SecretExpiresAt: resp.ClientSecretExpiresAt,
		AuthMethod:      resp.TokenEndpointAuthMethod,
		RedirectURIs:    []string{h.opts.RedirectURL},
		Registered:      time.Now().UTC(),
	}
	if len(resp.RedirectURIs) > 0 {
		reg.RedirectURIs = resp.RedirectURIs
	}
	return h.opts.Store.SaveRegistration(ctx, reg)
}

// newTokenSource is the SDK's NewTokenSource hook, called once the code is exchanged: it checks
// that the SDK talked to the issuer the credential will be stored under, persists the
// credential, and returns the persisting token source.
func (h *Handler) newTokenSource(_ context.Context, d *discovered, c *oauth2.Config, t *oauth2.Token) (oauth2.TokenSource, error) {
	if c.Endpoint.TokenURL != d.asm.TokenEndpoint {
		return nil, &BindingError{What: "token_endpoint"}
	}
	if c.Endpoint.AuthURL != d.asm.AuthorizationEndpoint {
		return nil, &BindingError{What: "authorization_endpoint"}
	}
	scopes := c.Scopes
	if s, ok := t.Extra("scope").(string); ok && s != "" {
		scopes = strings.Fields(s)
	}
	cred := &Credential{
		Key:          Key{Resource: h.resource, Issuer: d.issuer},
		Audience:     d.audience,
		TokenURL:     c.Endpoint.TokenURL,
		ClientID:     c.ClientID,
		ClientSecret: c.ClientSecret,
		AuthStyle:    int(c.Endpoint.AuthStyle),
		Scopes:       slices.Clone(scopes),
		AccessToken:  t.AccessToken,
		TokenType:    t.TokenType,
		RefreshToken: t.RefreshToken,
		Expiry:       t.Expiry,
		Updated:      time.Now().UTC(),
	}
	if err := h.opts.Store.Save(context.Background(), cred); err != nil {
		return nil, err
	}
	return h.newStoreSource(cred), nil
}

// sanitize maps an error of the SDK's flow to this package's prose-free errors. fetchErr is the
// error the fetcher returned, if any: it is the caller's own and passes through.
func (h *Handler) sanitize(ctx context.Context, err, fetchErr error) error {
	var be *BindingError
	var re *oauth2.RetrieveError
	var se *StoreError
	switch {
	case fetchErr != nil && errors.Is(err, fetchErr):
		return fetchErr
	case errors.As(err, &be):
		return be
	case errors.As(err, &se):
		return se
	case ctx.Err() != nil:
		return &AuthorizationError{Stage: "authorization", err: ctx.Err()}
	case errors.As(err, &re):
		return &AuthorizationError{Stage: "token", Code: sanitizeCode(re.ErrorCode), err: h.dialRefusal()}
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "state mismatch"):
		return &AuthorizationError{Stage: "state"}
	case strings.Contains(msg, "failed to register"):
		return &AuthorizationError{Stage: "registration", err: h.dialRefusal()}
	case strings.Contains(msg, "issuer"), strings.Contains(msg, "RFC 9207"):
		return &AuthorizationError{Stage: "issuer_check"}
	case strings.Contains(msg, "token exchange"):
		return &AuthorizationError{Stage: "token", err: h.dialRefusal()}
	}
	return &AuthorizationError{Stage: "authorization", err: h.dialRefusal()}
}

// checkAuthURL verifies that the authorization URL the SDK built points at the discovered
// authorization endpoint and names the discovered resource.
func checkAuthURL(raw string, d *discovered) error {
	u, err := url.Parse(raw)
	if err != nil {
		return &BindingError{What: "authorization_endpoint"}
	}
	q := u.Query()
	u.RawQuery, u.Fragment = "", ""
	want, err := url.Parse(d.asm.AuthorizationEndpoint)
	if err != nil {
		return &BindingError{What: "authorization_endpoint"}
	}
	want.RawQuery, want.Fragment = "", ""
	if u.String() != want.String() {
		return &BindingError{What: "authorization_endpoint"}
	}
	if q.Get("resource") != d.audience {
		return &BindingError{What: "resource"}
	}
	return nil
}

// union returns a ∪ b, keeping a's order, then b's new elements.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func loopbackRedirect(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	h := u.Hostname()
	return u.Scheme == "http" && (h == "127.0.0.1" || h == "::1" || h == "localhost")
}

// redirectRegistered reports whether redirect may be used with a client registered for
// registered: exact match, or (RFC 8252 §7.3) the same loopback URL on another port.
func redirectRegistered(registered []string, redirect string) bool {
	if slices.Contains(registered, redirect) {
		return true
	}
	r, err := url.Parse(redirect)
	if err != nil || !loopbackRedirect(redirect) {
		return false
	}
	for _, s := range registered {
		u, err := url.Parse(s)
		if err == nil && loopbackRedirect(s) && u.Hostname() == r.Hostname() && u.Path == r.Path {
			return true
		}
	}
	return false
}
