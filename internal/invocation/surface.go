package invocation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/clock"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/argschema"
	"github.com/b10x/connector-mcp/internal/tracing"
	"github.com/b10x/connector-mcp/mcpclient"
	"github.com/b10x/connector-mcp/ocipack"
	"github.com/b10x/connector-mcp/snapshot"
)

// Options configure a Surface.
type Options struct {
	// Connector opens sessions to the server. Required (the production one is *EgressConnector).
	Connector Connector
	// Authorizer decides every Describe and Invoke. Required (the production one is
	// *SubjectAccessReviewer).
	Authorizer Authorizer
	// Schemas caches compiled input schemas per snapshot. Nil: a private cache. Share one
	// across surfaces so a rebuilt surface for the same snapshot compiles nothing.
	Schemas *SchemaCache
	// MaxArgumentBytes bounds the arguments of one call (zero: mcpclient.DefaultMaxArgumentBytes).
	MaxArgumentBytes int
	// MaxResultBytes bounds the result of one call (zero: mcpclient.DefaultMaxResultBytes).
	MaxResultBytes int
	// MaxSessionAge is how long one MCP session is reused. An older session is closed and the
	// next call connects again, which lists the live tools and compares them with the frozen
	// snapshot (live_drift). Zero: DefaultMaxSessionAge; negative: a session is never reused.
	MaxSessionAge time.Duration
	// RelistInterval is the staleness bound of the live tool list: once the last check of a
	// session's tools (at connect or at the last re-list) is this old, the next call first lists
	// the tools again (tools/list, the same mcpclient listing and bounds as the freeze; concurrent
	// callers share one re-list) and a live list that is not the frozen snapshot is refused
	// live_drift before anything is sent. So a changed server is called for at most this long
	// (plus one listing) after it changed. A session that reports a tool-list change
	// (notifications/tools/list_changed, see Session) is stale at once. Zero:
	// DefaultRelistInterval; negative: every call re-lists.
	RelistInterval time.Duration
	// Clock is the time source for MaxSessionAge, RelistInterval and audit durations (nil: the
	// real clock).
	Clock clock.PassiveClock
	// Audit, when set, is called once per Describe, per Invoke and per Call ("invoke"), after the
	// outcome is known (refusals included), on the caller's goroutine. Keep it fast.
	Audit func(context.Context, AuditEvent)
	// Gate, when set, is asked by Invoke and Call after the call is authorized, exposed and its
	// arguments checked, and before anything is sent upstream (the approval of destructive
	// operations: internal/approval). Nil: every admitted call runs.
	Gate Gate
}

// Gate decides whether an admitted call may run (approval). Check runs before anything is sent
// upstream: it refuses (nothing is sent), or returns nil (run) or a commit function that the
// surface calls once the upstream session is ready and its live tool list checked, right before
// the tools/call is sent; a commit that fails refuses the call and nothing is sent. Commit is
// where an approval is consumed, so a call refused live_drift does not spend it.
type Gate interface {
	Check(ctx context.Context, c *GatedCall) (commit func(context.Context) error, err error)
}

// GatedCall is what a Gate judges: the admitted call, the reviewed facts of its operation and
// the approval reference the caller sent with it.
type GatedCall struct {
	// Caller is the authenticated caller.
	Caller Caller
	// Target is the deployment.
	Target Target
	// Operation is the operation reference; Effect its reviewed effect.
	Operation string
	Effect    apiv1.Effect
	// Mode is the deployment's approval mode for the operation (empty: the default).
	Mode apiv1.ApprovalMode
	// Sensitive are the argument names the reviewed profile marks sensitive.
	Sensitive []string
	// InputSchema is the frozen input schema.
	InputSchema json.RawMessage
	// Snapshot and Profile are the frozen snapshot and reviewed profile digests of the surface.
	Snapshot, Profile string
	// Arguments are the checked arguments (one JSON object).
	Arguments json.RawMessage
	// Approval is what the caller sent about approval with the call.
	Approval ApprovalHint
}

// ApprovalHint is what a caller sends about approval with a call: the McpApprovalRequest the call
// is the retry of, or the expiry it asks for when a request is created.
type ApprovalHint struct {
	// Request names the McpApprovalRequest (the deployment's namespace) this call is the retry
	// of ("" when none).
	Request string
	// TTL is the lifetime the caller asks for a new request (zero: the gateway's default; the
	// gateway's ceiling bounds it).
	TTL time.Duration
}

// DefaultMaxSessionAge is the default Options.MaxSessionAge: how long one upstream session is
// reused before a new one is connected. The live tool list is checked more often than this, every
// Options.RelistInterval.
const DefaultMaxSessionAge = 5 * time.Minute

// DefaultRelistInterval is the default Options.RelistInterval: a surface in use re-lists the live
// tools and compares them with the frozen snapshot before the first call after the last check is
// this old, so a drifted server keeps receiving calls for at most about this long.
const DefaultRelistInterval = 30 * time.Second

// operation is one exposed operation of a surface.
type operation struct {
	mapping     apiv1.OperationMapping
	inputSchema json.RawMessage
	approval    apiv1.ApprovalMode
}

// Surface is the callable authority surface of one activated ServiceDeployment: its exposed
// operations as the reviewed profile describes them, bound to the frozen snapshot digest. It is
// immutable once built (a new reviewed profile or a new activation means a new surface) and safe
// for concurrent use. It keeps at most one MCP session open, connected on first use and checked
// against the frozen snapshot; Close ends it.
type Surface struct {
	target     Target
	service    string
	connection string
	digest     string
	profile    string
	// verified is when the live server was last verified against the snapshot
	// (status.lastFrozenTime; zero when not recorded).
	verified time.Time
	ops      map[string]*operation
	endpoint Endpoint
	opts     Options

	mu  sync.Mutex
	cur *pooledSession
}

// frozenAt is dep's status.lastFrozenTime (zero when not recorded).
func frozenAt(dep *apiv1.ServiceDeployment) time.Time {
	if t := dep.Status.LastFrozenTime; t != nil {
		return t.Time
	}
	return time.Time{}
}

// NewSurface builds the surface of deployment dep serving profile document doc. It refuses
// (RefusalInvalidSurface) a document that fails the reviewed-profile checks of ocipack.Validate
// (shape, one-to-one mapping, reconstructed digests, reviewed effects) or an exposed operation
// whose frozen descriptor has no "inputSchema", and refuses (RefusalNotActive) a deployment that
// is not Ready for its current generation, whose status.activeSnapshotDigest is not the
// document's recorded snapshot digest, or whose status.profileDigest is not the document's
// digest (ocipack.ProfileDigest): another profile over the same snapshot is not this surface.
// Only operations with expose: true are part of the surface.
func NewSurface(doc *apiv1.ProfileDocument, dep *apiv1.ServiceDeployment, opts Options) (*Surface, error) {
	if doc == nil || dep == nil || opts.Connector == nil || opts.Authorizer == nil {
		return nil, refuse(RefusalInvalidSurface, "", ErrInvalidSurface)
	}
	if err := ocipack.Validate(doc); err != nil {
		return nil, refuse(RefusalInvalidSurface, "", fmt.Errorf("%w: %w", ErrInvalidSurface, err))
	}
	profileDigest, err := ocipack.ProfileDigest(doc)
	if err != nil {
		return nil, refuse(RefusalInvalidSurface, "", fmt.Errorf("%w: %w", ErrInvalidSurface, err))
	}
	st := dep.Status
	if st.ActiveSnapshotDigest == "" || st.ActiveSnapshotDigest != doc.Snapshot.Digest || st.ProfileDigest != profileDigest ||
		st.ObservedGeneration != dep.Generation || !apimeta.IsStatusConditionTrue(st.Conditions, apiv1.ConditionReady) {
		return nil, refuse(RefusalNotActive, "", ErrNotActive)
	}
	if opts.Schemas == nil {
		opts.Schemas = NewSchemaCache()
	}
	if opts.MaxArgumentBytes <= 0 {
		opts.MaxArgumentBytes = mcpclient.DefaultMaxArgumentBytes
	}
	if opts.MaxResultBytes <= 0 {
		opts.MaxResultBytes = mcpclient.DefaultMaxResultBytes
	}
	if opts.MaxSessionAge == 0 {
		opts.MaxSessionAge = DefaultMaxSessionAge
	}
	if opts.RelistInterval == 0 {
		opts.RelistInterval = DefaultRelistInterval
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	descriptors := make(map[string]json.RawMessage, len(doc.Snapshot.Tools))
	for _, t := range doc.Snapshot.Tools {
		descriptors[t.Name] = t.Descriptor.Raw
	}
	exposed := make(map[string]bool, len(dep.Spec.Operations))
	approval := make(map[string]apiv1.ApprovalMode, len(dep.Spec.Operations))
	for _, b := range dep.Spec.Operations {
		if b.Expose {
			exposed[b.OperationRef] = true
			approval[b.OperationRef] = b.Approval
		}
	}
	s := &Surface{
		target:     Target{Namespace: dep.Namespace, Name: dep.Name},
		service:    doc.Service.Ref,
		connection: doc.Service.ConnectionRef,
		digest:     doc.Snapshot.Digest,
		profile:    profileDigest,
		ops:        map[string]*operation{},
		verified:   frozenAt(dep),
		opts:       opts,
	}
	for _, m := range doc.Operations {
		if !exposed[m.OperationRef] {
			continue
		}
		var d struct {
			InputSchema json.RawMessage `json:"inputSchema"`
		}
		// Exact-case decoding: an "InputSchema" variant next to "inputSchema" is not the schema.
		if err := snapshot.Unmarshal(descriptors[m.RemoteName], &d); err != nil || len(d.InputSchema) == 0 {
			return nil, refuse(RefusalInvalidSurface, m.OperationRef, ErrInvalidSchema)
		}
		s.ops[m.OperationRef] = &operation{mapping: m, inputSchema: d.InputSchema, approval: approval[m.OperationRef]}
	}
	conn := dep.Spec.MCPConnection
	s.endpoint = Endpoint{
		Namespace: dep.Namespace, Deployment: dep.Name, URL: conn.URL,
		AllowCIDRs:       append([]string(nil), conn.Egress.AllowCIDRs...),
		MaxArgumentBytes: opts.MaxArgumentBytes, MaxResultBytes: opts.MaxResultBytes,
	}
	if conn.CredentialRef != nil {
		c := *conn.CredentialRef
		s.endpoint.Credential = &c
	}
	if conn.CABundleRef != nil {
		c := *conn.CABundleRef
		s.endpoint.CABundle = &c
	}
	return s, nil
}

// ProfileDigest returns the reviewed profile digest this surface serves.
func (s *Surface) ProfileDigest() string { return s.profile }

// SnapshotDigest returns the frozen snapshot digest this surface serves.
func (s *Surface) SnapshotDigest() string { return s.digest }

// Connection returns the Connection reference of this surface (the profile's
// service.connectionRef).
func (s *Surface) Connection() string { return s.connection }

// Target returns the ServiceDeployment callers are authorized on.
func (s *Surface) Target() Target { return s.target }

// Operations returns the exposed operation references, sorted.
func (s *Surface) Operations() []string {
	out := make([]string, 0, len(s.ops))
	for ref := range s.ops {
		out = append(out, ref)
	}
	sort.Strings(out)
	return out
}

// Description is what Describe returns: the locally owned facts of one exposed operation and a
// lease for invoking it.
type Description struct {
	// Operation is the operation reference.
	Operation string `json:"operation"`
	// Connection is the Connection reference.
	Connection string `json:"connection"`
	// Service is the service reference.
	Service string `json:"service"`
	// Title is the reviewed title.
	Title string `json:"title"`
	// Description is the reviewed description.
	Description string `json:"description,omitempty"`
	// Effect is the reviewed effect: read, write or destructive.
	Effect apiv1.Effect `json:"effect"`
	// InputSchema is the input JSON Schema of the frozen descriptor, byte for byte.
	InputSchema json.RawMessage `json:"inputSchema"`
	// Snapshot is the frozen snapshot digest.
	Snapshot string `json:"snapshot"`
	// Lease binds a later Invoke to this snapshot, reviewed profile, caller seed, operation (its
	// remote name and effect) and Connection (see Lease).
	Lease string `json:"lease"`
}

// Describe authorizes caller on the deployment, then returns the facts of the exposed operation
// and a lease. Refusals, in order: invalid_caller, wrong_connection, forbidden (the caller may
// not invoke this deployment; nothing about its operations is revealed), not_exposed,
// invalid_schema (the frozen input schema does not compile: the operation cannot be invoked).
func (s *Surface) Describe(ctx context.Context, caller Caller, operation, connection string) (d *Description, err error) {
	defer func(start time.Time) { s.audit(ctx, "describe", caller, operation, connection, nil, start, err) }(s.opts.Clock.Now())
	op, err := s.admit(ctx, caller, operation, connection)
	if err != nil {
		return nil, err
	}
	if _, err := s.opts.Schemas.get(s.digest, op.mapping.RemoteName, op.inputSchema); err != nil {
		return nil, refuse(RefusalInvalidSchema, operation, err)
	}
	return s.describe(op, caller, connection)
}

// List authorizes caller once and describes every exposed operation whose input schema compiles,
// sorted by operation reference, each with its lease: what a gateway answers an agent's tools/list
// with. Operations whose frozen schema does not compile are left out (Describe names them
// invalid_schema). Refusals: invalid_caller, wrong_connection, forbidden.
func (s *Surface) List(ctx context.Context, caller Caller, connection string) (out []*Description, err error) {
	defer func(start time.Time) { s.audit(ctx, "list", caller, "", connection, nil, start, err) }(s.opts.Clock.Now())
	if err := s.authorize(ctx, caller, "", connection); err != nil {
		return nil, err
	}
	for _, ref := range s.Operations() {
		op := s.ops[ref]
		if _, err := s.opts.Schemas.get(s.digest, op.mapping.RemoteName, op.inputSchema); err != nil {
			continue
		}
		d, err := s.describe(op, caller, connection)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// describe builds the description of op with the caller's lease.
func (s *Surface) describe(op *operation, caller Caller, connection string) (*Description, error) {
	m := op.mapping
	lease, err := Lease(s.leaseInput(op, caller.Seed, connection))
	if err != nil {
		return nil, refuse(RefusalInvalidCaller, m.OperationRef, err)
	}
	return &Description{
		Operation: m.OperationRef, Connection: s.connection, Service: s.service,
		Title: m.Title, Description: m.Description, Effect: m.Effect,
		InputSchema: bytes.Clone(op.inputSchema), Snapshot: s.digest, Lease: lease,
	}, nil
}

// leaseInput is what the lease of op binds on this surface for seed and connection.
func (s *Surface) leaseInput(op *operation, seed, connection string) LeaseInput {
	m := op.mapping
	return LeaseInput{
		Snapshot: s.digest, Profile: s.profile, Seed: seed, Operation: m.OperationRef,
		RemoteName: m.RemoteName, Effect: m.Effect, Connection: connection,
	}
}

// Request is one invocation.
type Request struct {
	// Caller is the authenticated caller; its Seed must be the one the lease was issued for.
	Caller Caller
	// Lease is the lease Describe returned.
	Lease string
	// Operation is the operation reference.
	Operation string
	// Connection is the Connection reference.
	Connection string
	// Arguments is one JSON object (empty means {}).
	Arguments json.RawMessage
	// Approval is what the caller sent about approval (passed to Options.Gate).
	Approval ApprovalHint
}

// Result is a successful invocation.
type Result struct {
	// Operation is the operation reference.
	Operation string `json:"operation"`
	// Snapshot is the frozen snapshot digest the call was made under.
	Snapshot string `json:"snapshot"`
	// JSON is the complete tools/call result exactly as received (unknown members and content
	// types included).
	JSON json.RawMessage `json:"result"`
}

// Invoke runs one invocation. Refusals, in order: invalid_caller, wrong_connection, forbidden,
// not_exposed, stale_lease, argument_too_large, invalid_schema, invalid_arguments (the arguments
// are not one JSON object, hold member names equal under case folding, or violate the frozen
// input schema: *InvalidArgumentsError), then the
// remote call of the mapped tool name: live_drift (when the session connects, or re-lists once
// its last check is RelistInterval old, and the live tool list is not the frozen one: *DriftError;
// nothing is sent), result_too_large, tool_error (*ToolError carrying the
// result JSON). Any other failure of the call is a *CallError.
func (s *Surface) Invoke(ctx context.Context, req Request) (res *Result, err error) {
	var x exchange
	defer func(start time.Time) {
		s.audit(ctx, "invoke", req.Caller, req.Operation, req.Connection, &x, start, err)
	}(s.opts.Clock.Now())
	op, err := s.admit(ctx, req.Caller, req.Operation, req.Connection)
	if err != nil {
		return nil, err
	}
	x.effect = op.mapping.Effect
	want, err := Lease(s.leaseInput(op, req.Caller.Seed, req.Connection))
	if err != nil {
		return nil, refuse(RefusalInvalidCaller, req.Operation, err)
	}
	if !leaseEqual(want, req.Lease) {
		return nil, refuse(RefusalStaleLease, req.Operation, ErrStaleLease)
	}
	args, err := s.validate(ctx, op, req.Operation, req.Arguments)
	if err != nil {
		return nil, err
	}
	commit, err := s.gate(ctx, req.Caller, op, args, req.Approval)
	if err != nil {
		return nil, err
	}
	raw, err := s.call(ctx, req.Operation, op.mapping.RemoteName, args, commit, &x)
	if err != nil {
		return nil, err
	}
	return &Result{Operation: req.Operation, Snapshot: s.digest, JSON: raw}, nil
}

// Call describes and invokes operation for caller in one step: what a gateway answers an
// agent's tools/call on a deployment route with. It is Describe followed by Invoke with the lease
// Describe returned, without the lease round trip: the lease would be computed and checked in the
// same step over the same surface and caller, so it binds nothing more here. Caller, Connection,
// authorization and exposure are checked once, and one audit event ("invoke") is recorded.
// Refusals, in order: invalid_caller, wrong_connection, forbidden, not_exposed, invalid_schema,
// argument_too_large, invalid_arguments, then those of the remote call as for Invoke.
func (s *Surface) Call(ctx context.Context, caller Caller, operation, connection string, args json.RawMessage) (res *Result, err error) {
	return s.CallApproved(ctx, caller, operation, connection, args, ApprovalHint{})
}

// CallApproved is Call with what the caller sent about approval (Options.Gate judges it).
func (s *Surface) CallApproved(ctx context.Context, caller Caller, operation, connection string, args json.RawMessage, approval ApprovalHint) (res *Result, err error) {
	var x exchange
	defer func(start time.Time) { s.audit(ctx, "invoke", caller, operation, connection, &x, start, err) }(s.opts.Clock.Now())
	op, err := s.admit(ctx, caller, operation, connection)
	if err != nil {
		return nil, err
	}
	x.effect = op.mapping.Effect
	if _, err := s.opts.Schemas.get(s.digest, op.mapping.RemoteName, op.inputSchema); err != nil {
		return nil, refuse(RefusalInvalidSchema, operation, err)
	}
	args, err = s.validate(ctx, op, operation, args)
	if err != nil {
		return nil, err
	}
	commit, err := s.gate(ctx, caller, op, args, approval)
	if err != nil {
		return nil, err
	}
	raw, err := s.call(ctx, operation, op.mapping.RemoteName, args, commit, &x)
	if err != nil {
		return nil, err
	}
	return &Result{Operation: operation, Snapshot: s.digest, JSON: raw}, nil
}

// admit runs the checks Describe and Invoke share: caller, Connection, authorization, exposure.
func (s *Surface) admit(ctx context.Context, caller Caller, operation, connection string) (*operation, error) {
	if err := s.authorize(ctx, caller, operation, connection); err != nil {
		return nil, err
	}
	op, ok := s.ops[operation]
	if !ok {
		return nil, refuse(RefusalNotExposed, operation, ErrNotExposed)
	}
	return op, nil
}

// authorize checks the caller and the Connection, then asks the Authorizer (in a span
// "authorize", whose attributes the Authorizer may add to).
func (s *Surface) authorize(ctx context.Context, caller Caller, operation, connection string) error {
	if caller.User == "" || caller.Seed == "" || !utf8.ValidString(caller.User) || !utf8.ValidString(caller.Seed) {
		return refuse(RefusalInvalidCaller, "", ErrInvalidCaller)
	}
	if connection != s.connection {
		return refuse(RefusalWrongConnection, "", ErrWrongConnection)
	}
	actx, span := tracing.Tracer().Start(ctx, "authorize")
	allowed, err := s.opts.Authorizer.Authorize(actx, caller, s.target)
	switch {
	case err != nil:
		tracing.EndNamed(span, "authorization_unavailable")
	case !allowed:
		tracing.EndNamed(span, RefusalForbidden)
	default:
		tracing.EndNamed(span, "")
	}
	if err != nil {
		return &AuthorizationError{Operation: operation, Err: err}
	}
	if !allowed {
		return refuse(RefusalForbidden, "", ErrForbidden)
	}
	return nil
}

// validate is checkArguments in a span "validate arguments" ending with the refusal name.
func (s *Surface) validate(ctx context.Context, op *operation, ref string, raw json.RawMessage) (json.RawMessage, error) {
	_, span := tracing.Tracer().Start(ctx, "validate arguments")
	args, err := s.checkArguments(op, ref, raw)
	tracing.EndWith(span, err)
	return args, err
}

// checkArguments bounds, parses and validates the arguments against the frozen input schema.
func (s *Surface) checkArguments(op *operation, ref string, raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) > s.opts.MaxArgumentBytes {
		return nil, refuse(RefusalArgumentTooLarge, ref, ErrArgumentTooLarge)
	}
	sch, err := s.opts.Schemas.get(s.digest, op.mapping.RemoteName, op.inputSchema)
	if err != nil {
		return nil, refuse(RefusalInvalidSchema, ref, err)
	}
	// The shared argument rules (argschema.Schema.Check): one JSON object, no duplicate keys,
	// invalid UTF-8 or trailing data, no member names equal under case folding, then the schema.
	args, err := sch.Check(raw)
	if err != nil {
		var v *argschema.Violation
		if errors.As(err, &v) {
			return nil, &InvalidArgumentsError{Operation: ref, Pointer: v.Pointer, Keyword: v.Keyword}
		}
		return nil, &InvalidArgumentsError{Operation: ref}
	}
	return args, nil
}

// gate asks Options.Gate about an admitted call (nil, nil without a gate).
func (s *Surface) gate(ctx context.Context, caller Caller, op *operation, args json.RawMessage, approval ApprovalHint) (func(context.Context) error, error) {
	if s.opts.Gate == nil {
		return nil, nil
	}
	m := op.mapping
	return s.opts.Gate.Check(ctx, &GatedCall{
		Caller: caller, Target: s.target, Operation: m.OperationRef, Effect: m.Effect, Mode: op.approval,
		Sensitive: m.SensitiveArguments, InputSchema: op.inputSchema, Snapshot: s.digest, Profile: s.profile,
		Arguments: args, Approval: approval,
	})
}

// call calls the remote tool through the surface's session, in a span "upstream call" (the
// session's HTTP requests carry its W3C trace context on), and records the upstream status class
// and the exchange's duration in x.
func (s *Surface) call(ctx context.Context, ref, remote string, args json.RawMessage, commit func(context.Context) error, x *exchange) (raw json.RawMessage, err error) {
	ctx, span := tracing.Tracer().Start(ctx, "upstream call", trace.WithSpanKind(trace.SpanKindClient))
	start := s.opts.Clock.Now()
	defer func() {
		x.upstreamTime = s.opts.Clock.Since(start)
		if x.upstream == "" {
			x.upstream = UpstreamNone
		}
		span.SetAttributes(tracing.KeyUpstreamStatus.String(x.upstream))
		tracing.EndWith(span, err)
	}()
	return s.exchange(ctx, ref, remote, args, commit, x)
}

// exchange is call's work: it maps the outcome. commit (nil: none) runs once the session is
// ready, right before the tools/call is sent; its error refuses the call.
func (s *Surface) exchange(ctx context.Context, ref, remote string, args json.RawMessage, commit func(context.Context) error, x *exchange) (json.RawMessage, error) {
	ps, err := s.acquire(ctx)
	if err != nil {
		var de *DriftError
		if errors.As(err, &de) {
			return nil, err
		}
		if errors.Is(err, mcpclient.ErrInsufficientScope) {
			return nil, refuse(RefusalInsufficientScope, ref, err)
		}
		return nil, &CallError{Operation: ref, Err: err}
	}
	defer s.release(ps)
	if commit != nil {
		if err := commit(ctx); err != nil {
			return nil, err
		}
	}
	raw, err := ps.sess.CallTool(ctx, remote, args)
	x.upstream = upstreamClass(err)
	if err != nil {
		var te *mcpclient.ToolError
		var re *mcpclient.RefusalError
		var tr *mcpclient.TransportError
		switch {
		case errors.As(err, &te):
			if len(te.Result) > s.opts.MaxResultBytes {
				return nil, refuse(RefusalResultTooLarge, ref, ErrResultTooLarge)
			}
			return nil, &ToolError{Operation: ref, Result: te.Result}
		case errors.As(err, &re) && (re.Name == "result_too_large" || re.Name == "frame_too_large"),
			errors.Is(err, mcpclient.ErrResultTooLarge), errors.Is(err, mcpclient.ErrFrameTooLarge):
			return nil, refuse(RefusalResultTooLarge, ref, fmt.Errorf("%w: %w", ErrResultTooLarge, err))
		case errors.Is(err, mcpclient.ErrInsufficientScope):
			// The session is spent too (the SDK closes it on an HTTP error): reconnect next time.
			s.retire(ps)
			return nil, refuse(RefusalInsufficientScope, ref, err)
		case errors.As(err, &tr), errors.Is(err, mcpclient.ErrConnectionClosed):
			// The session is gone (closed connection, expired HTTP session): reconnect next time.
			s.retire(ps)
		}
		return nil, &CallError{Operation: ref, Err: err}
	}
	if len(raw) > s.opts.MaxResultBytes {
		return nil, refuse(RefusalResultTooLarge, ref, ErrResultTooLarge)
	}
	return raw, nil
}

// pooledSession is the surface's session with the calls running on it. A retired session is
// closed when its last call ends, so retiring never breaks a call in flight.
type pooledSession struct {
	sess      Session
	connected time.Time
	calls     int
	retired   bool
	// checked is when the last live tool list that matched the frozen snapshot was asked for;
	// changed, when the session reports tool-list changes, fires on each one (stale then records
	// it); relist is the re-list under way, shared by concurrent callers.
	checked time.Time
	changed <-chan struct{}
	stale   bool
	relist  *relistFlight
}

// relistFlight is one re-list of a pooled session. err is set before done is closed.
type relistFlight struct {
	done chan struct{}
	err  error
}

// ToolListNotifier is implemented by a Session that can report the server's
// notifications/tools/list_changed (*mcpclient.Session does when its ServerConfig sets
// WatchToolListChanged). The surface then treats the session's live tool list as stale at once:
// the next call re-lists before it is sent. A notification never changes the surface.
type ToolListNotifier interface {
	// ToolListChanged delivers a value (coalesced) per notification.
	ToolListChanged() <-chan struct{}
}

// CachedToolLister is implemented by a Session whose tools/list may be answered from a client-side
// cache (the server marked its list cacheable with ttlMs: *mcpclient.Session reports it). A
// re-list on such a session could read the cached, older list, so the surface connects a new
// session instead.
type CachedToolLister interface {
	// ToolListMayBeCached reports whether a later ListTools may be served from a cache.
	ToolListMayBeCached() bool
}

// listStaleLocked reports whether ps's live tool list must be listed again before a call.
func (s *Surface) listStaleLocked(ps *pooledSession) bool {
	if ps.changed != nil {
		select {
		case <-ps.changed:
			ps.stale = true
		default:
		}
	}
	return ps.stale || s.opts.RelistInterval < 0 || s.opts.Clock.Since(ps.checked) >= s.opts.RelistInterval
}

// acquire returns the current session for one call. With none, or one older than MaxSessionAge,
// it connects (and checks the live tool list against the frozen snapshot); connecting happens
// under the surface's lock, so concurrent first calls share one connection. When the session's
// last check is older than RelistInterval (or the server said its list changed), it lists the
// tools again on that session first, outside the lock: concurrent callers wait for that one
// re-list, calls already running on the session are not held up, and a live list that is not
// the frozen one retires the session and refuses every waiting call with the same DriftError.
// A re-list that fails otherwise retires the session too, and the call connects a new one.
func (s *Surface) acquire(ctx context.Context) (*pooledSession, error) {
	s.mu.Lock()
	for s.cur != nil {
		ps := s.cur
		if s.opts.Clock.Since(ps.connected) >= s.opts.MaxSessionAge {
			closeLater(s.retireLocked(ps))
			break
		}
		if f := ps.relist; f != nil {
			s.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			var de *DriftError
			if errors.As(f.err, &de) {
				return nil, f.err
			}
			s.mu.Lock()
			continue
		}
		if !s.listStaleLocked(ps) {
			ps.calls++
			s.mu.Unlock()
			return ps, nil
		}
		if cl, ok := ps.sess.(CachedToolLister); ok && cl.ToolListMayBeCached() {
			// A re-list might read the client's cache: a new session lists afresh.
			closeLater(s.retireLocked(ps))
			break
		}
		f := &relistFlight{done: make(chan struct{})}
		ps.relist = f
		ps.calls++ // the re-list runs on ps: it is not closed under it
		started := s.opts.Clock.Now()
		s.mu.Unlock()
		live, err := ps.sess.ListTools(ctx)
		if err == nil && live.Digest != s.digest {
			err = &DriftError{Frozen: s.digest, Live: live.Digest}
		}
		s.mu.Lock()
		ps.relist, f.err = nil, err
		close(f.done)
		if err == nil {
			ps.checked, ps.stale = started, false
			s.mu.Unlock()
			return ps, nil
		}
		ps.calls--
		if ps.retired {
			// Retired meanwhile (past MaxSessionAge, a broken call): close it if this was its last use.
			if ps.calls == 0 {
				closeLater(ps.sess)
			}
		} else {
			closeLater(s.retireLocked(ps))
		}
		var de *DriftError
		if errors.As(err, &de) {
			s.mu.Unlock()
			return nil, err
		}
		// Any other failure (an expired HTTP session, a broken connection): connect afresh.
	}
	defer s.mu.Unlock()
	sess, err := s.opts.Connector.Connect(ctx, s.endpoint)
	if err != nil {
		return nil, err
	}
	started := s.opts.Clock.Now()
	live, err := sess.ListTools(ctx)
	if err != nil {
		closeLater(sess)
		return nil, err
	}
	if live.Digest != s.digest {
		closeLater(sess)
		return nil, &DriftError{Frozen: s.digest, Live: live.Digest}
	}
	ps := &pooledSession{sess: sess, connected: s.opts.Clock.Now(), checked: started, calls: 1}
	if n, ok := sess.(ToolListNotifier); ok {
		ps.changed = n.ToolListChanged()
	}
	if s.opts.MaxSessionAge > 0 {
		s.cur = ps
	} else {
		ps.retired = true // not reused: closed after this call
	}
	return ps, nil
}

// release ends one call on ps.
func (s *Surface) release(ps *pooledSession) {
	s.mu.Lock()
	ps.calls--
	var done Session
	if ps.retired && ps.calls == 0 {
		done = ps.sess
	}
	s.mu.Unlock()
	if done != nil {
		_ = done.Close()
	}
}

// retire stops handing ps out; it is closed when its last call ends.
func (s *Surface) retire(ps *pooledSession) {
	s.mu.Lock()
	done := s.retireLocked(ps)
	s.mu.Unlock()
	if done != nil {
		_ = done.Close()
	}
}

// retireLocked retires ps and returns its session when no call runs on it any more: the caller
// closes it outside the lock (closing may send an HTTP DELETE).
func (s *Surface) retireLocked(ps *pooledSession) Session {
	if s.cur == ps {
		s.cur = nil
	}
	if ps.retired {
		return nil
	}
	ps.retired = true
	if ps.calls == 0 {
		return ps.sess
	}
	return nil
}

// closeLater closes sess without holding up the caller (nil: nothing to do). Close is bounded
// by the egress deadline.
func closeLater(sess Session) {
	if sess != nil {
		go func() { _ = sess.Close() }()
	}
}

// Close ends the surface's session, if any, once the calls running on it end. The surface stays
// usable: the next Invoke connects again.
func (s *Surface) Close() error {
	s.mu.Lock()
	var done Session
	if s.cur != nil {
		done = s.retireLocked(s.cur)
	}
	s.mu.Unlock()
	if done != nil {
		return done.Close()
	}
	return nil
}
