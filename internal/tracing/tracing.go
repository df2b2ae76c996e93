// Package tracing sets up OpenTelemetry tracing for the manager and the gateway from the standard
// OTEL_* environment variables: off unless an OTLP endpoint is configured, OTLP over HTTP
// (http/protobuf, the default) or gRPC, W3C trace context propagation. The tracer it installs is
// the global one (otel.Tracer), so the packages that make spans need no wiring.
//
// What a span may carry is the caller's business and is kept to names, digests and outcome
// names: never arguments, results, tokens, Secret values or anything an MCP server wrote
// (docs/observability.md).
package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/b10x/connector-mcp/refusal"
)

// Protocols are the values of OTEL_EXPORTER_OTLP_TRACES_PROTOCOL / OTEL_EXPORTER_OTLP_PROTOCOL.
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// ErrInvalidConfig is returned (wrapped) for an OTEL_* value this package cannot use.
var ErrInvalidConfig = errors.New("tracing: invalid OTEL_* configuration")

// Config is what Setup read from the environment.
type Config struct {
	// Enabled: an OTLP endpoint is set, OTEL_SDK_DISABLED is not true and OTEL_TRACES_EXPORTER
	// is otlp or unset.
	Enabled bool
	// Protocol is ProtocolHTTP or ProtocolGRPC.
	Protocol string
}

// ReadConfig reads the configuration from getenv (os.Getenv in the binaries).
func ReadConfig(getenv func(string) string) (Config, error) {
	var c Config
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return c, nil
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "", "otlp":
	case "none":
		return c, nil
	default:
		return c, fmt.Errorf("%w: OTEL_TRACES_EXPORTER=%q (otlp or none)", ErrInvalidConfig, clip(exp))
	}
	if getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" {
		return c, nil // off by default
	}
	c.Enabled = true
	c.Protocol = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
	if c.Protocol == "" {
		c.Protocol = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
	}
	switch c.Protocol {
	case "":
		c.Protocol = ProtocolHTTP
	case ProtocolHTTP, ProtocolGRPC:
	default:
		return c, fmt.Errorf("%w: OTLP protocol %q (http/protobuf or grpc)", ErrInvalidConfig, clip(c.Protocol))
	}
	return c, nil
}

func clip(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}

// Setup installs, from the process environment, the global tracer provider and the W3C trace-context propagator for service
// (the default service.name; OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES add to it), when the
// environment enables tracing. The exporter reads its endpoint, headers, TLS and timeout from the
// standard OTEL_EXPORTER_OTLP_* variables; the sampler and the batch processor theirs
// (OTEL_TRACES_SAMPLER, OTEL_BSP_*). The returned shutdown flushes and stops it (a no-op when
// tracing is off). The propagator is installed either way, so a trace context is carried on even
// by a process that exports nothing.
func Setup(ctx context.Context, service, version string) (Config, func(context.Context) error, error) {
	otel.SetTextMapPropagator(propagation.TraceContext{})
	noop := func(context.Context) error { return nil }
	c, err := ReadConfig(os.Getenv)
	if err != nil || !c.Enabled {
		return c, noop, err
	}
	var client otlptrace.Client
	if c.Protocol == ProtocolGRPC {
		client = otlptracegrpc.NewClient()
	} else {
		client = otlptracehttp.NewClient()
	}
	exp, err := otlptrace.New(ctx, client)
	if err != nil {
		return c, noop, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	kv := []attribute.KeyValue{semconv.ServiceName(service)}
	if version != "" {
		kv = append(kv, semconv.ServiceVersion(version))
	}
	res, err := resource.New(ctx, resource.WithAttributes(kv...), resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return c, noop, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Second)), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	return c, tp.Shutdown, nil
}

// Attribute keys of connector-mcp's spans.
const (
	KeyNamespace      = attribute.Key("connector_mcp.namespace")
	KeyName           = attribute.Key("connector_mcp.name")
	KeyKind           = attribute.Key("connector_mcp.kind")
	KeyGeneration     = attribute.Key("connector_mcp.generation")
	KeyStage          = attribute.Key("connector_mcp.stage")
	KeyOutcome        = attribute.Key("connector_mcp.outcome")
	KeyReason         = attribute.Key("connector_mcp.reason")
	KeySnapshotDigest = attribute.Key("connector_mcp.snapshot_digest")
	// Gateway requests.
	KeyRequestID      = attribute.Key("connector_mcp.request_id")
	KeyRoute          = attribute.Key("connector_mcp.route")
	KeyMethod         = attribute.Key("connector_mcp.method")
	KeyOperation      = attribute.Key("connector_mcp.operation")
	KeyCaller         = attribute.Key("connector_mcp.caller")
	KeyCache          = attribute.Key("connector_mcp.cache")
	KeyUpstreamStatus = attribute.Key("connector_mcp.upstream_status")
)

// EndNamed ends span with an outcome name: Ok for "", else Error with name as the status
// description and connector_mcp.outcome.
func EndNamed(span trace.Span, name string) {
	if name == "" {
		span.SetStatus(codes.Ok, "")
	} else {
		span.SetAttributes(KeyOutcome.String(name))
		span.SetStatus(codes.Error, name)
	}
	span.End()
}

// Tracer is connector-mcp's tracer (the global provider's: a no-op until Setup installs one).
func Tracer() trace.Tracer { return otel.Tracer("github.com/b10x/connector-mcp") }

// EndWith ends span with the outcome of its work: Ok, or Error with the refusal name of err (a
// stable name such as "destination_refused"; "error" when err carries none) as the status
// description and connector_mcp.outcome. Nothing else of err is recorded: its text may hold
// what a server or registry wrote.
func EndWith(span trace.Span, err error) {
	if err == nil {
		EndNamed(span, "")
		return
	}
	name := refusal.Name(err)
	if name == "" {
		name = "error"
	}
	EndNamed(span, name)
}

// EndWithReason ends span like EndWith for a stage that failed with a condition reason (e.g.
// SnapshotDrift) and a refusal name (refusal may be empty); reason "" is success.
func EndWithReason(span trace.Span, reason, refusalName string) {
	if reason == "" {
		span.SetStatus(codes.Ok, "")
		span.End()
		return
	}
	span.SetAttributes(KeyReason.String(reason))
	desc := reason
	if refusalName != "" {
		span.SetAttributes(KeyOutcome.String(refusalName))
		desc += ": " + refusalName
	}
	span.SetStatus(codes.Error, desc)
	span.End()
}

// StartForBinary is what a binary's main runs: Setup for service, logging whether tracing is on
// and over which protocol, and a stop that flushes within five seconds (logging a failure).
func StartForBinary(service string, log logr.Logger) (stop func(), err error) {
	c, shutdown, err := Setup(context.Background(), service, "")
	if err != nil {
		return func() {}, err
	}
	log.Info("Tracing", "enabled", c.Enabled, "protocol", c.Protocol)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdown(ctx); err != nil {
			log.Error(err, "Flushing traces failed")
		}
	}, nil
}
