// Package otlptest is an OTLP trace receiver for tests: OTLP/HTTP (POST /v1/traces, protobuf)
// or OTLP/gRPC (the collector's TraceService) on loopback, decoding what an exporter sends with
// the official OTLP protobuf types and keeping every span.
package otlptest

import (
	"context"
	"encoding/hex"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, flattened.
type Span struct {
	Service, Name        string
	TraceID, SpanID      string
	ParentSpanID         string
	Attributes           map[string]string
	StatusCode           string // "Unset", "Ok" or "Error"
	StatusMessage        string
	Start, End           time.Time
	ResourceAttributes   map[string]string
	InstrumentationScope string
}

// Receiver keeps the spans it received.
type Receiver struct {
	// Endpoint is what OTEL_EXPORTER_OTLP_ENDPOINT should be set to.
	Endpoint string
	// Protocol is what OTEL_EXPORTER_OTLP_PROTOCOL should be set to.
	Protocol string

	mu    sync.Mutex
	spans []Span
	close func()
}

// NewHTTP starts an OTLP/HTTP receiver; the test's cleanup stops it.
func NewHTTP(t testing.TB) *Receiver {
	r := &Receiver{Protocol: "http/protobuf"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "want POST /v1/traces application/x-protobuf", http.StatusBadRequest)
			return
		}
		b, err := io.ReadAll(io.LimitReader(req.Body, 64<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var msg collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &msg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.add(&msg)
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	r.Endpoint, r.close = srv.URL, srv.Close
	t.Cleanup(r.Close)
	return r
}

type grpcService struct {
	collectortrace.UnimplementedTraceServiceServer
	r *Receiver
}

func (g grpcService) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	g.r.add(req)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// NewGRPC starts an OTLP/gRPC receiver (plaintext: set OTEL_EXPORTER_OTLP_INSECURE=true); the
// test's cleanup stops it.
func NewGRPC(t testing.TB) *Receiver {
	r := &Receiver{Protocol: "grpc"}
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(s, grpcService{r: r})
	go func() { _ = s.Serve(ln) }()
	r.Endpoint, r.close = "http://"+ln.Addr().String(), s.Stop
	t.Cleanup(r.Close)
	return r
}

// Close stops the receiver.
func (r *Receiver) Close() {
	if r.close != nil {
		r.close()
		r.close = nil
	}
}

// Env is the environment that points an exporter at the receiver.
func (r *Receiver) Env() map[string]string {
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": r.Endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": r.Protocol}
	if r.Protocol == "grpc" {
		env["OTEL_EXPORTER_OTLP_INSECURE"] = "true"
	}
	return env
}

// Spans returns a copy of every span received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

func (r *Receiver) add(req *collectortrace.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, Span{
					Service: res["service.name"], Name: s.GetName(),
					TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					ParentSpanID: hex.EncodeToString(s.GetParentSpanId()),
					Attributes:   attrs(s.GetAttributes()),
					StatusCode:   statusName(int32(s.GetStatus().GetCode())), StatusMessage: s.GetStatus().GetMessage(),
					Start: unixNano(s.GetStartTimeUnixNano()), End: unixNano(s.GetEndTimeUnixNano()),
					ResourceAttributes: res, InstrumentationScope: ss.GetScope().GetName(),
				})
			}
		}
	}
}

func statusName(code int32) string {
	switch code {
	case 1:
		return "Ok"
	case 2:
		return "Error"
	}
	return "Unset"
}

// attrs flattens OTLP attributes to strings (ints and bools in their decimal/textual form).
func attrs(kvs []*commonpb.KeyValue) map[string]string {
	out := map[string]string{}
	for _, kv := range kvs {
		v := kv.GetValue()
		switch x := v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.GetKey()] = x.StringValue
		case *commonpb.AnyValue_IntValue:
			out[kv.GetKey()] = strconv.FormatInt(x.IntValue, 10)
		case *commonpb.AnyValue_BoolValue:
			out[kv.GetKey()] = map[bool]string{true: "true", false: "false"}[x.BoolValue]
		default:
			out[kv.GetKey()] = v.String()
		}
	}
	return out
}

// unixNano is the time of an OTLP timestamp (nanoseconds since the epoch; those past 2262 are
// clamped).
func unixNano(ns uint64) time.Time {
	if ns > math.MaxInt64 {
		ns = math.MaxInt64
	}
	return time.Unix(0, int64(ns))
}
