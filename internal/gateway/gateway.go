package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/approval"
	"github.com/b10x/connector-mcp/internal/audit"
	"github.com/b10x/connector-mcp/internal/invocation"
	"github.com/b10x/connector-mcp/internal/tracing"
)

// Defaults of Config.
const (
	// DefaultMaxInflight bounds the requests served at once by one replica.
	DefaultMaxInflight = 256
	// DefaultMaxInflightPerCaller bounds the requests of one caller served at once.
	DefaultMaxInflightPerCaller = 8
	// DefaultCallTimeout bounds one tools/call (describe, authorize, connect, call).
	DefaultCallTimeout = 60 * time.Second
	// DefaultMaxRequestBytes bounds one HTTP request body.
	DefaultMaxRequestBytes = 1 << 20
	// RetryAfterSeconds is the Retry-After of caller_busy and overloaded answers.
	RetryAfterSeconds = 1
	// DefaultBodyReadTimeout bounds the wait for one request body (read before any slot is
	// taken).
	DefaultBodyReadTimeout = 10 * time.Second
	// DefaultMaxSearchReviews bounds the deployments whose authorization one search_operations
	// call checks.
	DefaultMaxSearchReviews = 256
)

// Authenticator turns a bearer token into a caller; *TokenAuthenticator implements it.
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (invocation.Caller, error)
}

// Prechecker is an Authenticator that can refuse a request before it takes a slot, without asking
// the apiserver (*TokenAuthenticator: a token remembered as refused, a source over its budget of
// failed TokenReviews). A nil error means "authenticate".
type Prechecker interface {
	Precheck(ctx context.Context, token string) error
}

// Config configures a Gateway.
type Config struct {
	// Registry holds the served surfaces. Required.
	Registry *Registry
	// Authenticator authenticates bearer tokens. Required.
	Authenticator Authenticator
	// Authorizer decides whether a caller may invoke a deployment (the same cached
	// SubjectAccessReviewer the surfaces use). Required.
	Authorizer invocation.Authorizer
	// Reverifier asks the manager to re-verify a drifted deployment. Optional.
	Reverifier *Reverifier
	// Events records a Warning event on a drifted deployment. Optional.
	Events events.EventRecorder
	// MaxInflight bounds the requests served at once (zero: DefaultMaxInflight).
	MaxInflight int
	// MaxInflightPerCaller bounds one caller's requests served at once (zero:
	// DefaultMaxInflightPerCaller).
	MaxInflightPerCaller int
	// CallTimeout bounds one tools/call (zero: DefaultCallTimeout).
	CallTimeout time.Duration
	// MaxRequestBytes bounds one request body (zero: DefaultMaxRequestBytes).
	MaxRequestBytes int64
	// BodyReadTimeout bounds the wait for the request body, which is read (bounded by
	// MaxRequestBytes) before the request takes a global or per-caller slot (zero:
	// DefaultBodyReadTimeout; negative: no deadline, for tests only).
	BodyReadTimeout time.Duration
	// MaxSearchReviews bounds the deployments whose authorization one search_operations call
	// checks (one SubjectAccessReview each on a decision-cache miss); a search that reaches it
	// answers "partial": true (zero: DefaultMaxSearchReviews).
	MaxSearchReviews int
	// AllowedHosts are the Host header names (without port) the gateway answers. Empty: go-sdk's
	// default DNS-rebinding protection (a request arriving on a loopback address must name a
	// loopback host). Set: exactly these names are accepted, on any address.
	AllowedHosts []string
	// Audit receives one record per tools/call and per request refused before its method was
	// read (audit.KindCall). Optional.
	Audit *audit.Logger
	// Metrics are optional.
	Metrics *Metrics
	// Log receives request failures and the drift notices (nil: discard).
	Log logr.Logger
}

// Gateway is the inbound MCP HTTP handler. Build it with New; serve Handler().
type Gateway struct {
	cfg      Config
	inflight chan struct{}
	mu       sync.Mutex
	perCall  map[string]int
	draining atomic.Bool
	wg       sync.WaitGroup
	mcpH     *mcp.StreamableHTTPHandler
	impl     *mcp.Implementation

	// bodyReads counts the request bodies being read (tests wait on it).
	bodyReads atomic.Int64
	// bodyAfterSlots is a test seam: read the body after taking the slots, as before issue 21,
	// so the slowloris test can show that ordering blocking an unrelated caller.
	bodyAfterSlots atomic.Bool
}

// callerKey carries the authenticated caller and the route through the request context.
type ctxKey struct{}

type reqInfo struct {
	caller invocation.Caller
	route  route
	// trail is the request's id, span and audit record.
	trail *trail
	// body is the request body, already read (nil: not read).
	body []byte
}

// route is what the URL names: a deployment (ns/name) or the meta route (empty).
type route struct{ ns, name string }

func (r route) meta() bool { return r.ns == "" }

func (r route) label() string {
	if r.meta() {
		return "meta"
	}
	return "deployment"
}

// New returns a gateway.
func New(cfg Config) (*Gateway, error) {
	if cfg.Registry == nil || cfg.Authenticator == nil || cfg.Authorizer == nil {
		return nil, errors.New("gateway: Registry, Authenticator and Authorizer are required")
	}
	if cfg.MaxInflight <= 0 {
		cfg.MaxInflight = DefaultMaxInflight
	}
	if cfg.MaxInflightPerCaller <= 0 {
		cfg.MaxInflightPerCaller = DefaultMaxInflightPerCaller
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.BodyReadTimeout == 0 {
		cfg.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if cfg.MaxSearchReviews <= 0 {
		cfg.MaxSearchReviews = DefaultMaxSearchReviews
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(cfg.Registry.Len)
	}
	g := &Gateway{cfg: cfg, inflight: make(chan struct{}, cfg.MaxInflight), perCall: map[string]int{},
		impl: &mcp.Implementation{Name: "connector-mcp-gateway", Version: "v1"}}
	g.mcpH = mcp.NewStreamableHTTPHandler(g.server, &mcp.StreamableHTTPOptions{
		Stateless:                    true,
		JSONResponse:                 true,
		MaxRequestBodyBytes:          cfg.MaxRequestBytes,
		DisableLocalhostProtection:   len(cfg.AllowedHosts) > 0,
		PropagateRequestCancellation: true,
	})
	return g, nil
}

// Handler serves /mcp and /mcp/{namespace}/{servicedeployment}.
func (g *Gateway) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) { g.serve(w, r, route{}) })
	mux.HandleFunc("/mcp/{namespace}/{name}", func(w http.ResponseWriter, r *http.Request) {
		g.serve(w, r, route{ns: r.PathValue("namespace"), name: r.PathValue("name")})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeRefusal(w, http.StatusNotFound, RefusalNotFound)
	})
	return mux
}

// Drain makes the gateway refuse new requests (shutting_down) and waits until the running ones
// end or ctx is done.
func (g *Gateway) Drain(ctx context.Context) error {
	g.draining.Store(true)
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Draining reports whether Drain was called (the readiness probe fails then).
func (g *Gateway) Draining() bool { return g.draining.Load() }

// serve admits one HTTP request: drain, host, the bearer token and the authenticator's precheck
// (a token remembered as refused, or a source over its failure budget, is refused before its body
// is read or a slot taken), the bounded body (read under BodyReadTimeout before any slot is taken,
// so a stalled body holds nothing but its connection), global limit, authentication, per-caller
// limit.
func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, rt route) {
	if g.draining.Load() {
		w.Header().Set("Retry-After", strconv.Itoa(RetryAfterSeconds))
		writeRefusal(w, http.StatusServiceUnavailable, RefusalShuttingDown)
		return
	}
	g.wg.Add(1)
	defer g.wg.Done()
	ctx, tr := g.startRequest(w, r, rt)
	defer g.end(tr)
	r = r.WithContext(ctx)
	if len(g.cfg.AllowedHosts) > 0 && !slices.Contains(g.cfg.AllowedHosts, hostOnly(r.Host)) {
		tr.setOutcome("", RefusalHostNotAllowed)
		writeRefusal(w, http.StatusForbidden, RefusalHostNotAllowed)
		return
	}
	ctx = WithSource(ctx, sourceOf(r))
	token, ok := bearer(r)
	if !ok {
		tr.setOutcome("", RefusalUnauthenticated)
		g.unauthenticated(w, rt)
		return
	}
	if pc, isPC := g.cfg.Authenticator.(Prechecker); isPC {
		if err := pc.Precheck(ctx, token); err != nil {
			tr.setOutcome("", authRefusal(err))
			g.authRefused(w, rt, err)
			return
		}
	}
	var body []byte
	if !g.bodyAfterSlots.Load() {
		if body, ok = g.readBody(w, r); !ok {
			return
		}
	}
	select {
	case g.inflight <- struct{}{}:
		defer func() { <-g.inflight }()
	default:
		tr.setOutcome("", RefusalOverloaded)
		g.cfg.Metrics.Requests.WithLabelValues(rt.label(), RefusalOverloaded).Inc()
		w.Header().Set("Retry-After", strconv.Itoa(RetryAfterSeconds))
		writeRefusal(w, http.StatusServiceUnavailable, RefusalOverloaded)
		return
	}
	g.cfg.Metrics.InFlight.Inc()
	defer g.cfg.Metrics.InFlight.Dec()

	actx, aspan := tracing.Tracer().Start(ctx, "authenticate")
	caller, err := g.cfg.Authenticator.Authenticate(actx, token)
	if err != nil {
		tracing.EndNamed(aspan, authRefusal(err))
		tr.setOutcome("", authRefusal(err))
		g.authRefused(w, rt, err)
		return
	}
	tracing.EndNamed(aspan, "")
	tr.authenticated(caller)
	if !g.enter(caller.Seed) {
		tr.setOutcome("", RefusalCallerBusy)
		g.cfg.Metrics.Requests.WithLabelValues(rt.label(), RefusalCallerBusy).Inc()
		w.Header().Set("Retry-After", strconv.Itoa(RetryAfterSeconds))
		writeRefusal(w, http.StatusTooManyRequests, RefusalCallerBusy)
		return
	}
	defer g.leave(caller.Seed)
	if g.bodyAfterSlots.Load() {
		if body, ok = g.readBody(w, r); !ok {
			return
		}
	}
	info := &reqInfo{caller: caller, route: rt, body: body, trail: tr}
	if g.serveDirect(w, r, info) {
		return
	}
	g.mcpH.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, info)))
}

// readBody reads r's body, at most MaxRequestBytes within BodyReadTimeout, and puts it back as a
// buffered body. On failure it answers (413, 408 request_body_timeout or 400) and returns false.
func (g *Gateway) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	g.bodyReads.Add(1)
	defer g.bodyReads.Add(-1)
	rc := http.NewResponseController(w)
	if g.cfg.BodyReadTimeout > 0 {
		_ = rc.SetReadDeadline(time.Now().Add(g.cfg.BodyReadTimeout))
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, g.cfg.MaxRequestBytes))
	_ = r.Body.Close()
	if g.cfg.BodyReadTimeout > 0 {
		// The deadline must not outlive the read: the server's background read of the idle
		// connection would take it for a client gone and cancel the request's context.
		_ = rc.SetReadDeadline(time.Time{})
	}
	if err != nil {
		var mbe *http.MaxBytesError
		var ne net.Error
		tr := trailFrom(r.Context())
		switch {
		case errors.As(err, &mbe):
			tr.setOutcome("", "request_too_large")
			http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
		case errors.As(err, &ne) && ne.Timeout():
			tr.setOutcome("", RefusalRequestBodyTimeout)
			w.Header().Set("Connection", "close")
			writeRefusal(w, http.StatusRequestTimeout, RefusalRequestBodyTimeout)
		default:
			tr.setOutcome("", "request_unreadable")
			http.Error(w, "failed to read body", http.StatusBadRequest)
		}
		return nil, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, true
}

// sourceOf is the address r came from as the gateway sees it (the remote IP, without port): the
// key of the per-source limit on failed authentications. Forwarded headers are not trusted.
func sourceOf(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// authRefusal names the refusal authRefused answers err with.
func authRefusal(err error) string {
	var ae *AuthError
	if errors.As(err, &ae) && errors.Is(err, ErrAuthRateLimited) {
		return RefusalAuthRateLimited
	}
	return RefusalUnauthenticated
}

// authRefused answers an authentication failure: 429 authentication_rate_limited with
// Retry-After, or 401 unauthenticated.
func (g *Gateway) authRefused(w http.ResponseWriter, rt route, err error) {
	var ae *AuthError
	switch {
	case errors.As(err, &ae) && errors.Is(err, ErrAuthRateLimited):
		g.cfg.Metrics.Requests.WithLabelValues(rt.label(), RefusalAuthRateLimited).Inc()
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int((ae.RetryAfter+time.Second-1)/time.Second))))
		writeRefusal(w, http.StatusTooManyRequests, RefusalAuthRateLimited)
		return
	case errors.Is(err, ErrTokenReviewUnavailable):
		g.cfg.Log.Info("Token review failed", "reason", err.Error())
	}
	g.unauthenticated(w, rt)
}

func (g *Gateway) unauthenticated(w http.ResponseWriter, rt route) {
	g.cfg.Metrics.Requests.WithLabelValues(rt.label(), RefusalUnauthenticated).Inc()
	w.Header().Set("WWW-Authenticate", `Bearer realm="connector-mcp", error="invalid_token"`)
	writeRefusal(w, http.StatusUnauthorized, RefusalUnauthenticated)
}

func (g *Gateway) enter(seed string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.perCall[seed] >= g.cfg.MaxInflightPerCaller {
		return false
	}
	g.perCall[seed]++
	return true
}

func (g *Gateway) leave(seed string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.perCall[seed]--; g.perCall[seed] <= 0 {
		delete(g.perCall, seed)
	}
}

// server builds the stateless MCP server of one HTTP request, bound to its caller and route.
func (g *Gateway) server(r *http.Request) *mcp.Server {
	info, _ := r.Context().Value(ctxKey{}).(*reqInfo)
	if info == nil {
		return nil
	}
	s := mcp.NewServer(g.impl, &mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}}})
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case "tools/list":
				res, err := g.listTools(ctx, info)
				info.trail.setOutcome(method, outcome(err))
				g.cfg.Metrics.Requests.WithLabelValues(info.route.label(), outcome(err)).Inc()
				return res, withRequestID(err, info.trail.requestID())
			case "tools/call":
				p, _ := req.GetParams().(*mcp.CallToolParamsRaw)
				return g.handleCall(ctx, info, p)
			}
			info.trail.setOutcome(method, "ok")
			if f := refusedFeature(method); f != "" {
				info.trail.setOutcome(method, f)
				g.cfg.Metrics.Requests.WithLabelValues(info.route.label(), f).Inc()
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "refused: " + f}
			}
			return next(ctx, method, req)
		}
	})
	return s
}

// RefusedFeatures are the MCP features the gateway does not serve (it serves tools only): a
// method of one is refused with the feature's name as its outcome.
var RefusedFeatures = []string{"prompts", "resources", "completion"}

// refusedFeature names the MCP feature of a method the gateway does not serve (one of
// RefusedFeatures); "" for anything else.
func refusedFeature(method string) string {
	for _, f := range RefusedFeatures {
		if strings.HasPrefix(method, f+"/") {
			return f
		}
	}
	return ""
}

// outcome names the outcome carried by a JSON-RPC refusal error.
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		return strings.TrimPrefix(we.Message, "refused: ")
	}
	return RefusalCallFailed
}

// listTools answers tools/list.
func (g *Gateway) listTools(ctx context.Context, info *reqInfo) (mcp.Result, error) {
	if info.route.meta() {
		return &mcp.ListToolsResult{Tools: metaTools(), Cacheable: privateNoStore}, nil
	}
	s, err := g.surface(ctx, info.caller, info.route.ns, info.route.name)
	if err != nil {
		return nil, err
	}
	ds, err := s.List(ctx, info.caller, s.Connection())
	if err != nil {
		return nil, refusal(err)
	}
	tools := make([]*mcp.Tool, 0, len(ds))
	for _, d := range ds {
		tools = append(tools, toolOf(d))
	}
	return &mcp.ListToolsResult{Tools: tools, Cacheable: privateNoStore}, nil
}

// privateNoStore marks a tools/list answer as the caller's own (it depends on the caller's
// grants) and immediately stale (grants and activations change).
var privateNoStore = mcp.Cacheable{CacheScope: "private"}

// toolOf is the tool an operation is listed as: only reviewed facts and the frozen schema.
func toolOf(d *invocation.Description) *mcp.Tool {
	return &mcp.Tool{Name: d.Operation, Title: d.Title, Description: d.Description,
		InputSchema: d.InputSchema, Annotations: EffectAnnotations(d.Effect)}
}

// EffectAnnotations derives a tool's annotations from the reviewed effect only: read →
// readOnlyHint; write → neither hint; destructive → destructiveHint. Nothing the server said
// (its annotations, idempotency or open-world claims) is repeated.
func EffectAnnotations(e apiv1.Effect) *mcp.ToolAnnotations {
	f, t := false, true
	switch e {
	case apiv1.EffectRead:
		return &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &f}
	case apiv1.EffectDestructive:
		return &mcp.ToolAnnotations{DestructiveHint: &t}
	default:
		return &mcp.ToolAnnotations{DestructiveHint: &f}
	}
}

// surface finds the surface of ns/name for caller. A deployment that is not served is refused as
// forbidden when the caller may not invoke it (so nothing about another tenant's deployments is
// revealed) and as not_active otherwise.
func (g *Gateway) surface(ctx context.Context, caller invocation.Caller, ns, name string) (*invocation.Surface, error) {
	if s, ok := g.cfg.Registry.Lookup(ns, name); ok {
		return s, nil
	}
	allowed, err := g.cfg.Authorizer.Authorize(ctx, caller, invocation.Target{Namespace: ns, Name: name})
	switch {
	case err != nil:
		return nil, refusalNamed(RefusalAuthorizationUnavailable)
	case !allowed:
		return nil, refusalNamed(invocation.RefusalForbidden)
	}
	return nil, refusalNamed(RefusalNotActive)
}

// callTool answers tools/call.
func (g *Gateway) callTool(ctx context.Context, info *reqInfo, p *mcp.CallToolParamsRaw) (mcp.Result, error) {
	if p == nil {
		return nil, refusalNamed(RefusalInvalidParams)
	}
	ctx, cancel := detach(ctx, g.cfg.CallTimeout)
	defer cancel()
	ctx = info.trail.carry(ctx)
	if info.route.meta() {
		return g.callMeta(ctx, info, p)
	}
	s, err := g.surface(ctx, info.caller, info.route.ns, info.route.name)
	if err != nil {
		return nil, err
	}
	hint, err := approvalHint(p.Meta, "")
	if err != nil {
		return nil, err
	}
	return g.invoke(ctx, info.caller, s, p.Name, "", p.Arguments, true, hint)
}

// ApprovalTTLMetaKey is the _meta member of a tools/call request asking for the lifetime, in
// seconds, of the McpApprovalRequest the call creates (bounded by the gateway's ceiling).
const ApprovalTTLMetaKey = "connectors.b10x.io/approval-ttl-seconds"

// approvalHint reads the approval members of a call's _meta: the request name (apiv1.ApprovalMetaKey,
// a string; or fromArgs, the invoke_operation argument, which must agree) and the TTL asked for
// (ApprovalTTLMetaKey, a positive integer of seconds). Anything else is invalid_params.
func approvalHint(meta mcp.Meta, fromArgs string) (invocation.ApprovalHint, error) {
	var h invocation.ApprovalHint
	if v, ok := meta[apiv1.ApprovalMetaKey]; ok {
		name, isStr := v.(string)
		if !isStr || !validRequestName(name) {
			return h, refusalNamed(RefusalInvalidParams)
		}
		h.Request = name
	}
	if fromArgs != "" {
		if !validRequestName(fromArgs) || (h.Request != "" && h.Request != fromArgs) {
			return h, refusalNamed(RefusalInvalidParams)
		}
		h.Request = fromArgs
	}
	if v, ok := meta[ApprovalTTLMetaKey]; ok {
		f, isNum := v.(float64)
		if !isNum || f < 1 || f > 1e7 || f != float64(int64(f)) {
			return h, refusalNamed(RefusalInvalidParams)
		}
		h.TTL = time.Duration(int64(f)) * time.Second
	}
	return h, nil
}

// validRequestName reports whether s can be an McpApprovalRequest name (a DNS subdomain).
func validRequestName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '.' {
			return false
		}
	}
	return s[0] != '-' && s[0] != '.' && s[len(s)-1] != '-' && s[len(s)-1] != '.'
}

// detach returns a context with parent's cancellation and a deadline of timeout, but none of
// its values: the go-sdk server's request context carries the inbound protocol era, which the
// outbound go-sdk client would otherwise adopt for the upstream session. (callTool puts the
// request's span and trail back.)
func detach(parent context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	stop := context.AfterFunc(parent, cancel)
	return ctx, func() { stop(); cancel() }
}

// invoke invokes operation on s: with describe set, described and invoked in one step
// (Surface.Call, the per-deployment route's tools/call); otherwise under lease (the meta route's
// invoke_operation).
func (g *Gateway) invoke(ctx context.Context, caller invocation.Caller, s *invocation.Surface, operation, lease string, args json.RawMessage, describe bool, hint invocation.ApprovalHint) (mcp.Result, error) {
	conn := s.Connection()
	var res *invocation.Result
	var err error
	if describe {
		res, err = s.CallApproved(ctx, caller, operation, conn, args, hint)
	} else {
		res, err = s.Invoke(ctx, invocation.Request{Caller: caller, Lease: lease, Operation: operation, Connection: conn, Arguments: args, Approval: hint})
	}
	if err != nil {
		var te *invocation.ToolError
		if errors.As(err, &te) {
			return passThrough(te.Result)
		}
		var de *invocation.DriftError
		if errors.As(err, &de) {
			g.drifted(ctx, s)
		}
		return nil, g.callRefusal(ctx, err)
	}
	return passThrough(res.JSON)
}

// callRefusal maps a call failure, naming a deadline that passed.
func (g *Gateway) callRefusal(ctx context.Context, err error) error {
	g.cfg.Log.V(1).Info("Call refused", "outcome", invocation.Outcome(err), "err", err.Error())
	if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && invocation.Outcome(err) == "call_failed" {
		return refusalNamed(RefusalDeadlineExceeded)
	}
	return refusal(err)
}

// drifted asks the manager to re-verify s's deployment and records a Warning event.
func (g *Gateway) drifted(ctx context.Context, s *invocation.Surface) {
	t := s.Target()
	key := types.NamespacedName{Namespace: t.Namespace, Name: t.Name}
	g.cfg.Log.Info("Live drift seen at call time; re-verification requested", "namespace", t.Namespace, "name", t.Name, "snapshot", s.SnapshotDigest())
	if g.cfg.Reverifier == nil {
		return
	}
	sent, err := g.cfg.Reverifier.Request(context.WithoutCancel(ctx), key)
	if err != nil {
		g.cfg.Log.Info("Re-verification request failed", "namespace", t.Namespace, "name", t.Name, "reason", err.Error())
		return
	}
	if sent && g.cfg.Events != nil {
		sd := &apiv1.ServiceDeployment{}
		if err := g.cfg.Registry.Client.Get(context.WithoutCancel(ctx), key, sd); err == nil {
			g.cfg.Events.Eventf(sd, nil, "Warning", "LiveDrift", "RequestReverify",
				"the live tool list differs from the frozen snapshot %s at call time; re-verification requested", s.SnapshotDigest())
		}
	}
}

// rawResult is a tools/call result whose JSON is exactly the upstream's.
type rawResult struct {
	*mcp.CallToolResult
	raw json.RawMessage
}

// MarshalJSON returns the upstream result JSON.
func (r *rawResult) MarshalJSON() ([]byte, error) { return r.raw, nil }

// passThrough answers with the upstream result JSON. It must be one JSON object (mcpclient
// already checked it); the go-sdk server writes it as the JSON-RPC result.
func passThrough(raw json.RawMessage) (mcp.Result, error) {
	if len(raw) == 0 || raw[0] != '{' || !json.Valid(raw) {
		return nil, refusalNamed(RefusalResultNotRepresentable)
	}
	return &rawResult{CallToolResult: &mcp.CallToolResult{}, raw: raw}, nil
}

// Refusal error codes of JSON-RPC answers.
const (
	// CodeRefused is the JSON-RPC error code of every refusal but invalid arguments.
	CodeRefused = -32001
	// CodeInvalidArguments is the code of invalid_arguments, argument_too_large and
	// invalid_params (JSON-RPC "invalid params").
	CodeInvalidArguments = jsonrpc.CodeInvalidParams
)

// refusalData is the data member of a refusal.
type refusalData struct {
	Refusal string `json:"refusal"`
	Pointer string `json:"pointer,omitempty"`
	Keyword string `json:"keyword,omitempty"`
	// Approval names the McpApprovalRequest of an approval refusal (in Namespace); Hint says what
	// to do about approval_required.
	Approval  string `json:"approval,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Hint      string `json:"hint,omitempty"`
	// RequestID is the gateway's id of the request (RequestIDHeader).
	RequestID string `json:"requestId,omitempty"`
}

// refusal turns an invocation failure into a JSON-RPC error naming only the refusal (and, for
// invalid_arguments, the JSON Pointer and schema keyword).
func refusal(err error) error {
	name := invocation.Outcome(err)
	d := refusalData{Refusal: name}
	var ia *invocation.InvalidArgumentsError
	if errors.As(err, &ia) {
		d.Pointer, d.Keyword = ia.Pointer, ia.Keyword
	}
	var ar *approval.Refusal
	if errors.As(err, &ar) {
		d.Approval, d.Namespace = ar.Request, ar.Namespace
		if ar.Name == approval.RefusalApprovalRequired {
			d.Hint = approval.RetryHint
		}
	}
	return rpcError(d)
}

func refusalNamed(name string) error { return rpcError(refusalData{Refusal: name}) }

func rpcError(d refusalData) error {
	code := int64(CodeRefused)
	switch d.Refusal {
	case invocation.RefusalInvalidArguments, invocation.RefusalArgumentTooLarge, RefusalInvalidParams, RefusalUnknownTool:
		code = CodeInvalidArguments
	}
	data, _ := json.Marshal(d)
	return &jsonrpc.Error{Code: code, Message: "refused: " + d.Refusal, Data: data}
}

// writeRefusal answers an HTTP-level refusal with a JSON-RPC error body (id null).
// The data names the request id of the response header (RequestIDHeader), when one is set.
func writeRefusal(w http.ResponseWriter, status int, name string) {
	data, _ := json.Marshal(refusalData{Refusal: name, RequestID: w.Header().Get(RequestIDHeader)})
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil,
		"error": jsonrpc.Error{Code: CodeRefused, Message: "refused: " + name, Data: data}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// bearer extracts the bearer token of r.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	const p = "bearer "
	if len(h) <= len(p) || !strings.EqualFold(h[:len(p)], p) {
		return "", false
	}
	t := strings.TrimSpace(h[len(p):])
	return t, t != ""
}

func hostOnly(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		return strings.ToLower(host)
	}
	return strings.ToLower(h)
}
