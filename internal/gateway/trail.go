package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/b10x/connector-mcp/internal/audit"
	"github.com/b10x/connector-mcp/internal/invocation"
	"github.com/b10x/connector-mcp/internal/tracing"
)

// RequestIDHeader is the response header naming the gateway's id of the request. The same id is
// the request span's connector_mcp.request_id, the audit record's requestId and, in a refusal,
// the error data's requestId: a refused agent quotes it to the platform team.
const RequestIDHeader = "X-Request-Id"

// newRequestID returns a random id of 32 hex digits.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// startRequest begins the trail of one HTTP request: its id (in the response header), and its
// span "mcp request", continuing the trace of an incoming W3C traceparent header.
func (g *Gateway) startRequest(w http.ResponseWriter, r *http.Request, rt route) (context.Context, *trail) {
	tr := &trail{id: newRequestID(), route: rt, start: time.Now()}
	w.Header().Set(RequestIDHeader, tr.id)
	ctx := otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, tr.span = tracing.Tracer().Start(ctx, "mcp request", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(tracing.KeyRequestID.String(tr.id), tracing.KeyRoute.String(rt.label())))
	if !rt.meta() {
		tr.span.SetAttributes(tracing.KeyNamespace.String(rt.ns), tracing.KeyName.String(rt.name))
	}
	return context.WithValue(ctx, trailKey{}, tr), tr
}

// trailKey carries the request's trail through the call's contexts (detach keeps it).
type trailKey struct{}

func trailFrom(ctx context.Context) *trail {
	tr, _ := ctx.Value(trailKey{}).(*trail)
	return tr
}

// trail is what one request leaves behind: its span, and what its audit record says. The
// surface's audit events (invocation.AuditEvent) fill it in as the call runs.
type trail struct {
	id    string
	route route
	start time.Time
	span  trace.Span

	mu      sync.Mutex
	method  string
	caller  string
	event   *invocation.AuditEvent
	outcome string
}

// authenticated records the caller on the trail and its span (as the ServiceAccount name).
func (tr *trail) authenticated(c invocation.Caller) {
	tr.mu.Lock()
	tr.caller = c.User
	tr.mu.Unlock()
	tr.span.SetAttributes(tracing.KeyCaller.String(serviceAccountOf(c.User)))
}

// serviceAccountOf is NS/NAME of a ServiceAccount user name, "" for any other identity (its name
// is not copied into a span).
func serviceAccountOf(user string) string {
	rest, ok := strings.CutPrefix(user, "system:serviceaccount:")
	if !ok {
		return ""
	}
	ns, name, ok := strings.Cut(rest, ":")
	if !ok {
		return ""
	}
	return ns + "/" + name
}

// NoteSurfaceEvent records a surface's audit event on the trail of ctx's request (the gateway's
// invocation.Options.Audit: the composition root sets it). The invoke of a call wins over the
// describe and list before it.
func NoteSurfaceEvent(ctx context.Context, e invocation.AuditEvent) {
	tr := trailFrom(ctx)
	if tr == nil {
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.event == nil || tr.event.Action != "invoke" || e.Action == "invoke" {
		tr.event = &e
	}
}

// end ends the request: the span with its outcome, and the audit record of a tools/call or of a
// refusal before one (method "").
func (g *Gateway) end(tr *trail) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	outcome := tr.outcome
	if outcome == "" {
		outcome = "ok"
	}
	if e := tr.event; e != nil {
		tr.span.SetAttributes(tracing.KeyOperation.String(e.Operation), tracing.KeySnapshotDigest.String(e.Snapshot))
		if tr.route.meta() && e.Target.Name != "" {
			tr.span.SetAttributes(tracing.KeyNamespace.String(e.Target.Namespace), tracing.KeyName.String(e.Target.Name))
		}
	}
	refused := outcome
	if outcome == "ok" {
		refused = ""
	}
	tracing.EndNamed(tr.span, refused)
	elapsed := time.Since(tr.start)
	if e := tr.event; e != nil && e.Action == "invoke" && e.Upstream != "" && e.Upstream != invocation.UpstreamNone {
		g.cfg.Metrics.AddedLatency.WithLabelValues(tr.route.label()).Observe(max(0, elapsed-e.UpstreamDuration).Seconds())
	}
	audited := tr.method == "tools/call" || (tr.method == "" && outcome != "ok")
	if g.cfg.Audit == nil || !audited {
		return
	}
	rec := audit.Record{Kind: audit.KindCall, RequestID: tr.id, Caller: tr.caller, Outcome: outcome,
		Namespace: tr.route.ns, Name: tr.route.name, DurationSeconds: audit.Seconds(elapsed)}
	if rec.Name != "" {
		rec.Object = "ServiceDeployment"
	}
	if sc := tr.span.SpanContext(); sc.IsValid() {
		rec.TraceID = sc.TraceID().String()
	}
	if outcome != "ok" {
		rec.Refusal = outcome
	}
	if e := tr.event; e != nil {
		rec.Object, rec.Namespace, rec.Name = "ServiceDeployment", e.Target.Namespace, e.Target.Name
		rec.Operation, rec.Effect, rec.SnapshotDigest, rec.ProfileDigest = e.Operation, string(e.Effect), e.Snapshot, e.Profile
		rec.UpstreamStatus = e.Upstream
		if e.HasLeaseAge {
			rec.LeaseAgeSeconds = audit.Seconds(e.LeaseAge)
		}
	}
	if rec.UpstreamStatus == "" {
		rec.UpstreamStatus = invocation.UpstreamNone
	}
	if err := g.cfg.Audit.Write(rec); err != nil {
		g.cfg.Log.Info("Audit record not written", "reason", err.Error())
	}
}

// requestID is the request's id ("" without a trail).
func (tr *trail) requestID() string {
	if tr == nil {
		return ""
	}
	return tr.id
}

// carry puts the request's span and trail on ctx (a context detach cut from the request's).
func (tr *trail) carry(ctx context.Context) context.Context {
	if tr == nil {
		return ctx
	}
	return context.WithValue(trace.ContextWithSpan(ctx, tr.span), trailKey{}, tr)
}

// setOutcome records the request's method and outcome name ("ok" or a refusal).
func (tr *trail) setOutcome(method, outcome string) {
	if tr == nil {
		return
	}
	tr.mu.Lock()
	tr.method, tr.outcome = method, outcome
	tr.mu.Unlock()
	if method != "" {
		tr.span.SetAttributes(tracing.KeyMethod.String(method))
	}
}

// withRequestID returns err, a refusal, with the request id in its data (anything else as it is).
func withRequestID(err error, id string) error {
	var we *jsonrpc.Error
	if id == "" || !errors.As(err, &we) || len(we.Data) == 0 {
		return err
	}
	var d refusalData
	if json.Unmarshal(we.Data, &d) != nil {
		return err
	}
	d.RequestID = id
	data, _ := json.Marshal(d)
	return &jsonrpc.Error{Code: we.Code, Message: we.Message, Data: data}
}
