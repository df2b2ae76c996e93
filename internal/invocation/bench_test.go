package invocation_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/b10x/connector-mcp/internal/invocation"
	"github.com/b10x/connector-mcp/internal/mcptest"
	"github.com/b10x/connector-mcp/mcpclient"
)

// BenchmarkCall compares one call of "transfer" (schema with required, minimum, maxLength and
// additionalProperties) over loopback:
//
//   - bare: mcpclient.Session.CallTool, no egress (the floor);
//   - invoke: Surface.Invoke with a reused lease, on the same kind of bare session;
//   - describe+invoke: Surface.Describe then Surface.Invoke, on the same kind of bare session;
//   - describe+invoke/egress: the same through the egress port (EgressConnector).
//
// The authorizer allows in memory, so the apiserver round trip of the SubjectAccessReview
// (one per Describe and per Invoke) is not part of the figures.
func BenchmarkCall(b *testing.B) {
	srv := mcptest.StartHTTP(mcptest.NewServer("files", testTools()), mcptest.Modern)
	defer srv.Close()
	ctx := context.Background()
	doc := freeze(b, srv.URL)
	dep := deployment(doc, srv.URL)
	args := json.RawMessage(`{"amount":5,"to":"bob"}`)
	client := mcpclient.NewClient(nil)
	bare := invocation.ConnectorFunc(func(ctx context.Context, ep invocation.Endpoint) (invocation.Session, error) {
		return client.Connect(ctx, mcpclient.ServerConfig{HTTP: &mcpclient.HTTPServer{URL: ep.URL}})
	})
	allow := invocation.AuthorizerFunc(func(context.Context, invocation.Caller, invocation.Target) (bool, error) { return true, nil })
	surface := func(b *testing.B, c invocation.Connector) *invocation.Surface {
		s, err := invocation.NewSurface(doc, dep, invocation.Options{Connector: c, Authorizer: allow})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	}

	b.Run("bare", func(b *testing.B) {
		s, err := client.Connect(ctx, mcpclient.ServerConfig{HTTP: &mcpclient.HTTPServer{URL: srv.URL}})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		for b.Loop() {
			if _, err := s.CallTool(ctx, "transfer", args); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("invoke", func(b *testing.B) {
		s := surface(b, bare)
		d, err := s.Describe(ctx, alice, "transfer", "files")
		if err != nil {
			b.Fatal(err)
		}
		req := invocation.Request{Caller: alice, Lease: d.Lease, Operation: "transfer", Connection: "files", Arguments: args}
		for b.Loop() {
			if _, err := s.Invoke(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	})
	describeInvoke := func(b *testing.B, s *invocation.Surface) {
		for b.Loop() {
			d, err := s.Describe(ctx, alice, "transfer", "files")
			if err != nil {
				b.Fatal(err)
			}
			req := invocation.Request{Caller: alice, Lease: d.Lease, Operation: "transfer", Connection: "files", Arguments: args}
			if _, err := s.Invoke(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("describe+invoke", func(b *testing.B) { describeInvoke(b, surface(b, bare)) })
	b.Run("describe+invoke/egress", func(b *testing.B) { describeInvoke(b, surface(b, loopbackOptions(nil).Connector)) })
	call := func(b *testing.B, s *invocation.Surface) {
		for b.Loop() {
			if _, err := s.Call(ctx, alice, "transfer", "files", args); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("call", func(b *testing.B) { call(b, surface(b, bare)) })
	b.Run("call/egress", func(b *testing.B) { call(b, surface(b, loopbackOptions(nil).Connector)) })
}

// BenchmarkValidate is the local part of an invocation alone: lease check and schema
// validation of the arguments, with a server that is never reached (the arguments are invalid).
func BenchmarkValidate(b *testing.B) {
	srv := mcptest.StartHTTP(mcptest.NewServer("files", testTools()), mcptest.Modern)
	defer srv.Close()
	doc := freeze(b, srv.URL)
	allow := invocation.AuthorizerFunc(func(context.Context, invocation.Caller, invocation.Target) (bool, error) { return true, nil })
	never := invocation.ConnectorFunc(func(context.Context, invocation.Endpoint) (invocation.Session, error) {
		b.Fatal("connected")
		return nil, nil
	})
	s, err := invocation.NewSurface(doc, deployment(doc, srv.URL), invocation.Options{Connector: never, Authorizer: allow})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	d, err := s.Describe(ctx, alice, "transfer", "files")
	if err != nil {
		b.Fatal(err)
	}
	req := invocation.Request{Caller: alice, Lease: d.Lease, Operation: "transfer", Connection: "files", Arguments: json.RawMessage(`{"amount":0,"to":"bob"}`)}
	for b.Loop() {
		if _, err := s.Invoke(ctx, req); err == nil {
			b.Fatal("accepted")
		}
	}
}
