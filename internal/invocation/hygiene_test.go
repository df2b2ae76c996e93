package invocation_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/b10x/connector-mcp/internal/invocation"
	"github.com/b10x/connector-mcp/internal/mcptest"
	"github.com/b10x/connector-mcp/mcpclient"
)

// A JSON-RPC error from the server reaches the caller as its code only: the server's message
// (which may hold anything) never does.
func TestServerProseNeverSurfaces(t *testing.T) {
	const prose = "SERVER-PROSE token=abc123 /etc/secret"
	f := newFixture(t, nil, nil)
	f.srv.Server.AddTool(&mcp.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`),
		Description: "Echo the arguments back as text."}, // the same descriptor as before: no drift
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, errors.New(prose)
		})
	d := f.describe(t, alice, "echo")
	_, err := f.s.Invoke(context.Background(), invocation.Request{Caller: alice, Lease: d.Lease, Operation: "echo", Connection: "files",
		Arguments: json.RawMessage(`{"text":"argument-value-xyz"}`)})
	if err == nil {
		t.Fatal("the failing handler succeeded")
	}
	if !errors.Is(err, invocation.ErrCallFailed) {
		t.Fatalf("not a CallError: %v", err)
	}
	// go-sdk answers a failing low-level handler with a JSON-RPC error.
	var se *mcpclient.ServerError
	if !errors.As(err, &se) {
		t.Fatalf("not a JSON-RPC error: %v", err)
	}
	for _, leak := range []string{"SERVER-PROSE", "abc123", "argument-value-xyz"} {
		if strings.Contains(err.Error(), leak) {
			t.Fatalf("%q in the error: %v", leak, err)
		}
	}
}

// The refusals come in the documented order: with several faults, the first check names it.
func TestRefusalOrder(t *testing.T) {
	f := newFixture(t, []string{"read_file"}, func(o *invocation.Options) { o.MaxArgumentBytes = 64 })
	ctx := context.Background()
	d := f.describe(t, alice, "transfer")
	big := json.RawMessage(`{"amount":"` + strings.Repeat("x", 80) + `"}`)
	bad := json.RawMessage(`{"amount":"x"}`)
	cases := []struct {
		name string
		req  invocation.Request
		want string
	}{
		{"no seed and wrong connection", invocation.Request{Caller: invocation.Caller{User: alice.User}, Operation: "nope", Connection: "x"}, "invalid_caller"},
		{"wrong connection and forbidden", invocation.Request{Caller: mallory, Operation: "nope", Connection: "x"}, "wrong_connection"},
		{"forbidden and not exposed", invocation.Request{Caller: mallory, Operation: "read_file", Connection: "files"}, "forbidden"},
		{"not exposed and stale", invocation.Request{Caller: alice, Lease: d.Lease, Operation: "read_file", Connection: "files"}, "not_exposed"},
		{"stale and too large", invocation.Request{Caller: alice, Lease: "x", Operation: "transfer", Connection: "files", Arguments: big}, "stale_lease"},
		{"too large and invalid", invocation.Request{Caller: alice, Lease: d.Lease, Operation: "transfer", Connection: "files", Arguments: big}, "argument_too_large"},
		{"invalid", invocation.Request{Caller: alice, Lease: d.Lease, Operation: "transfer", Connection: "files", Arguments: bad}, "invalid_arguments"},
		{"none", invocation.Request{Caller: alice, Lease: d.Lease, Operation: "transfer", Connection: "files", Arguments: json.RawMessage(`{"amount":1,"to":"b"}`)}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := f.s.Invoke(ctx, c.req)
			if got := refusal(err); got != c.want || (c.want == "" && err != nil) {
				t.Fatalf("refusal %q (%v), want %q", got, err, c.want)
			}
		})
	}
}

// Refusals of the MCP client by feature name pass through as *CallError, still named: a tool
// requiring tasks, and every non-complete tools/call resultType (input_required, task, another).
func TestFeatureRefusalsPassThrough(t *testing.T) {
	for _, c := range []struct{ hostile, op, want string }{
		{mcptest.HostileTaskRequired, "long_job", "tasks"}, // the raw engine serves its own tool
		{mcptest.HostileInputRequired, "get", "input_required"},
		{mcptest.HostileTaskResult, "get", "tasks"},            // a created task is not a result
		{mcptest.HostileOtherResultType, "get", "multi_round"}, // any other non-complete resultType
		{mcptest.HostileNone, "get", ""},
	} {
		t.Run(c.want, func(t *testing.T) {
			srv := mcptest.StartRawHTTP(&mcptest.Raw{Era: mcptest.Modern, Hostile: c.hostile,
				Tools: []json.RawMessage{json.RawMessage(`{"name":"get","inputSchema":{"type":"object"}}`)}})
			t.Cleanup(srv.Close)
			doc := freeze(t, srv.URL)
			api := &fakeAPIServer{allow: map[string]bool{alice.User: true}}
			s, err := invocation.NewSurface(doc, deployment(doc, srv.URL), loopbackOptions(api))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			d, err := s.Describe(context.Background(), alice, c.op, "files")
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.Invoke(context.Background(), invocation.Request{Caller: alice, Lease: d.Lease, Operation: c.op, Connection: "files"})
			if got := refusal(err); got != c.want || (c.want == "" && err != nil) {
				t.Fatalf("refusal %q (%v), want %q", got, err, c.want)
			}
			if c.want != "" && (!errors.Is(err, invocation.ErrCallFailed) || !errors.Is(err, mcpclient.ErrFeatureRefused)) {
				t.Fatalf("not a CallError over a feature refusal: %v", err)
			}
		})
	}
}
