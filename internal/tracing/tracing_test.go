package tracing_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/b10x/connector-mcp/internal/tracing"
	"github.com/b10x/connector-mcp/internal/tracing/otlptest"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestOffByDefault: without an endpoint (or disabled) nothing is enabled; a bad protocol or
// exporter is refused by name.
func TestOffByDefault(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"empty":         {},
		"sdk disabled":  {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_SDK_DISABLED": "true"},
		"exporter none": {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_EXPORTER": "none"},
		"protocol only": {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
	} {
		c, err := tracing.ReadConfig(envOf(env))
		if err != nil || c.Enabled {
			t.Errorf("%s: %+v, %v; want off", name, c, err)
		}
	}
	for name, env := range map[string]map[string]string{
		"protocol": {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
		"exporter": {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_EXPORTER": "zipkin"},
	} {
		if _, err := tracing.ReadConfig(envOf(env)); !errors.Is(err, tracing.ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", name, err)
		}
	}
	c, err := tracing.ReadConfig(envOf(map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1/v1/traces"}))
	if err != nil || !c.Enabled || c.Protocol != tracing.ProtocolHTTP {
		t.Errorf("traces endpoint alone: %+v, %v; want http/protobuf", c, err)
	}
}

// TestExportsOverHTTPAndGRPC: with the endpoint of a real OTLP receiver (HTTP, then gRPC) a
// parent and a child span arrive, decoded with the OTLP protobuf types, with the service name,
// the parent link, the attributes and the error status; an incoming W3C traceparent is continued.
func TestExportsOverHTTPAndGRPC(t *testing.T) {
	for _, rcv := range []*otlptest.Receiver{otlptest.NewHTTP(t), otlptest.NewGRPC(t)} {
		t.Run(rcv.Protocol, func(t *testing.T) {
			ctx := context.Background()
			for k, v := range rcv.Env() {
				t.Setenv(k, v)
			}
			t.Setenv("OTEL_SERVICE_NAME", "connector-mcp-test")
			c, shutdown, err := tracing.Setup(ctx, "connector-mcp-manager", "v0")
			if err != nil || !c.Enabled {
				t.Fatalf("setup: %+v, %v", c, err)
			}
			carrier := propagation.MapCarrier{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
			in := otel.GetTextMapPropagator().Extract(ctx, carrier)
			tr := otel.Tracer("test")
			pctx, parent := tr.Start(in, "reconcile", trace.WithAttributes(tracing.KeyNamespace.String("team-a")))
			_, child := tr.Start(pctx, "stage SnapshotFrozen")
			child.SetStatus(codes.Error, "EndpointRefused")
			child.End()
			parent.End()
			if err := shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			otel.SetTracerProvider(noop.NewTracerProvider())
			deadline := time.Now().Add(10 * time.Second)
			var spans []otlptest.Span
			for len(spans) < 2 && time.Now().Before(deadline) {
				spans = rcv.Spans()
				time.Sleep(50 * time.Millisecond)
			}
			if len(spans) != 2 {
				t.Fatalf("received %d spans, want 2: %+v", len(spans), spans)
			}
			by := map[string]otlptest.Span{}
			for _, s := range spans {
				by[s.Name] = s
			}
			p, ch := by["reconcile"], by["stage SnapshotFrozen"]
			if p.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || p.ParentSpanID != "00f067aa0ba902b7" {
				t.Errorf("the incoming traceparent was not continued: trace %s parent %s", p.TraceID, p.ParentSpanID)
			}
			if ch.ParentSpanID != p.SpanID || ch.TraceID != p.TraceID {
				t.Errorf("child not under parent: %+v / %+v", ch, p)
			}
			if p.Service != "connector-mcp-test" || p.Attributes["connector_mcp.namespace"] != "team-a" {
				t.Errorf("parent service %q attributes %v", p.Service, p.Attributes)
			}
			if ch.StatusCode != "Error" || ch.StatusMessage != "EndpointRefused" {
				t.Errorf("child status %s %q", ch.StatusCode, ch.StatusMessage)
			}
		})
	}
}
