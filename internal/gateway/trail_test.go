package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/b10x/connector-mcp/internal/audit"
	"github.com/b10x/connector-mcp/internal/invocation"
	"github.com/b10x/connector-mcp/internal/mcptest"
)

// traceparents records the traceparent header of every request an upstream received.
type traceparents struct {
	mu   sync.Mutex
	seen []string
}

func (p *traceparents) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.seen = append(p.seen, r.Header.Get("traceparent"))
		p.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (p *traceparents) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.seen...)
}

// TestCallTrail: one call through the gateway, with an incoming traceparent, is one span tree in
// the caller's trace — "mcp request" (request id, route, method, operation, snapshot, caller as
// the ServiceAccount name) with "authenticate", "authorize", "validate arguments" and "upstream
// call" under it —, the upstream receives the trace context of "upstream call", and one audit
// record names the same request id and trace id with the digests, effect and upstream class. The
// refused twin: a call refused for its arguments sends nothing upstream, its error data and its
// record name its request id, and its record's upstream class is none. Nothing in a span or record
// carries an argument or the token.
func TestCallTrail(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })

	srv := mcptest.NewServer("upstream", testTools())
	var seen traceparents
	ts := httptest.NewServer(seen.wrap(mcptest.HTTPHandler(srv, mcptest.Modern)))
	t.Cleanup(ts.Close)
	up := &upstream{srv: srv, HTTPServer: &mcptest.HTTPServer{URL: ts.URL + "/mcp", Server: srv}}
	var trail bytes.Buffer
	var trailMu sync.Mutex
	w := newWorldOn(t, up, func(c *Config) { c.Audit = audit.New(lockedWriter{&trailMu, &trail}) })

	const parentTrace = "0af7651916cd43dd8448eb211c80319c"
	hc := &http.Client{Transport: headerRT{map[string]string{"traceparent": "00-" + parentTrace + "-b7ad6b7169203331-01"}, bearerRT{goodTok, http.DefaultTransport}}}
	cs := connectWith(t, w.url+"/mcp/team-a/files", hc)
	before := len(seen.all())
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "ARG-SECRET"}}); err != nil {
		t.Fatal(err)
	}
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "transfer", Arguments: map[string]any{"amount": 0, "to": "ARG-SECRET"}})
	var we *jsonrpc.Error
	if !errors.As(err, &we) {
		t.Fatalf("transfer: %v, want a refusal", err)
	}
	var data struct {
		RequestID string `json:"requestId"`
	}
	_ = json.Unmarshal(we.Data, &data)
	if len(data.RequestID) != 32 {
		t.Fatalf("refusal data %s names no request id", we.Data)
	}

	spans := rec.Ended()
	byName := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byName[s.Name()] = append(byName[s.Name()], s)
	}
	var call sdktrace.ReadOnlySpan
	for _, s := range byName["mcp request"] {
		if attr(s, "connector_mcp.operation") == "echo" && attr(s, "connector_mcp.method") == "tools/call" {
			call = s
		}
	}
	if call == nil {
		t.Fatalf("no mcp request span of the echo call among %d spans", len(spans))
	}
	if call.SpanContext().TraceID().String() != parentTrace || call.Parent().SpanID().String() != "b7ad6b7169203331" {
		t.Errorf("the request span did not continue the caller's trace: %s parent %s", call.SpanContext().TraceID(), call.Parent().SpanID())
	}
	if attr(call, "connector_mcp.caller") != "team-a/agent" || attr(call, "connector_mcp.snapshot_digest") != w.doc.Snapshot.Digest ||
		len(attr(call, "connector_mcp.request_id")) != 32 || attr(call, "connector_mcp.name") != testName {
		t.Errorf("request span attributes %v", call.Attributes())
	}
	var upstreamCall sdktrace.ReadOnlySpan
	for _, name := range []string{"authenticate", "authorize", "validate arguments", "upstream call"} {
		var child sdktrace.ReadOnlySpan
		for _, s := range byName[name] {
			if s.Parent().SpanID() == call.SpanContext().SpanID() {
				child = s
			}
		}
		if child == nil {
			t.Errorf("the echo call has no %q child", name)
			continue
		}
		if name == "upstream call" {
			upstreamCall = child
			if attr(child, "connector_mcp.upstream_status") != "2xx" {
				t.Errorf("upstream call attributes %v", child.Attributes())
			}
		}
	}
	if upstreamCall != nil {
		want := "00-" + parentTrace + "-" + upstreamCall.SpanContext().SpanID().String() + "-01"
		found := false
		for _, tp := range seen.all()[before:] {
			found = found || tp == want
		}
		if !found {
			t.Errorf("the upstream never received traceparent %s (got %v)", want, seen.all()[before:])
		}
	}

	trailMu.Lock()
	lines := strings.Split(strings.TrimSpace(trail.String()), "\n")
	trailMu.Unlock()
	records := map[string]audit.Record{}
	for _, l := range lines {
		var r audit.Record
		dec := json.NewDecoder(strings.NewReader(l))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("audit line %q: %v", l, err)
		}
		records[r.Operation] = r
	}
	ok := records["echo"]
	if ok.Kind != audit.KindCall || ok.Outcome != "ok" || ok.RequestID != attr(call, "connector_mcp.request_id") || ok.TraceID != parentTrace ||
		ok.Caller != "system:serviceaccount:team-a:agent" || ok.SnapshotDigest != w.doc.Snapshot.Digest || ok.ProfileDigest == "" ||
		ok.Effect != "read" || ok.UpstreamStatus != "2xx" || ok.LeaseAgeSeconds == nil || ok.DurationSeconds == nil || ok.Namespace != testNS || ok.Name != testName {
		t.Errorf("call record %+v", ok)
	}
	// The added latency is observed once, for the call that reached its upstream (the refused
	// call sent nothing), and is a part of the call's duration.
	var m dto.Metric
	if err := w.gw.cfg.Metrics.AddedLatency.WithLabelValues("deployment").(prometheus.Histogram).Write(&m); err != nil {
		t.Fatal(err)
	}
	if h := m.GetHistogram(); h.GetSampleCount() != 1 || h.GetSampleSum() <= 0 || h.GetSampleSum() >= *ok.DurationSeconds {
		t.Errorf("added latency: %d samples, sum %v s (the call took %v s)", h.GetSampleCount(), h.GetSampleSum(), *ok.DurationSeconds)
	}
	refused := records["transfer"]
	if refused.Outcome != invocation.RefusalInvalidArguments || refused.Refusal != invocation.RefusalInvalidArguments ||
		refused.RequestID != data.RequestID || refused.UpstreamStatus != invocation.UpstreamNone || refused.Effect != "write" {
		t.Errorf("refused record %+v (error data %s)", refused, we.Data)
	}
	for _, l := range lines {
		if strings.Contains(l, "ARG-SECRET") || strings.Contains(l, goodTok) {
			t.Errorf("the audit trail carries an argument or the token: %s", l)
		}
	}
	for _, s := range spans {
		for _, kv := range s.Attributes() {
			if v := kv.Value.String(); strings.Contains(v, "ARG-SECRET") || strings.Contains(v, goodTok) || strings.Contains(v, "127.0.0.1") {
				t.Errorf("span %s attribute %s=%q", s.Name(), kv.Key, v)
			}
		}
	}
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

// headerRT sets headers on every request.
type headerRT struct {
	h    map[string]string
	next http.RoundTripper
}

func (h headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.h {
		r.Header.Set(k, v)
	}
	return h.next.RoundTrip(r)
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// connectWith opens a go-sdk client session over hc.
func connectWith(t *testing.T, url string, hc *http.Client) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}
