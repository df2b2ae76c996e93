package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/b10x/connector-mcp/internal/mcptest"
)

// Every struct decode of server data in this package, fed a document whose exact-case member
// and a case variant disagree, reads the exact-case member (the variant is an unknown member),
// whatever the order; a document with only the variant reads as if the member were absent.
func TestServerDecodesAreCaseSensitive(t *testing.T) {
	cases := []struct {
		name string
		// decode runs one decoder entry point and reports what it read.
		decode func(raw string) string
		// docs are case-variant documents; exact is what each must read.
		docs  []string
		exact string
		// variantOnly is a document carrying only the variant; absent is what it must read.
		variantOnly, absent string
	}{
		{
			name: "tools/call result isError and resultType (parseCallResult)",
			decode: func(raw string) string {
				r, ok := parseCallResult([]byte(raw))
				if !ok {
					return "refused"
				}
				return r.ResultType + "/" + map[bool]string{true: "error", false: "ok"}[r.IsError]
			},
			docs: []string{
				`{"content":[],"isError":true,"IsError":false,"resultType":"complete","ResultType":"task"}`,
				`{"IsError":false,"isError":true,"RESULTTYPE":"task","resultType":"complete","content":[]}`,
			},
			exact:       "complete/error",
			variantOnly: `{"content":[],"IsError":true,"ResultType":"input_required"}`,
			absent:      "/ok",
		},
		{
			name: "descriptor execution.taskSupport (taskRequired)",
			decode: func(raw string) string {
				return map[bool]string{true: "required", false: "callable"}[taskRequired([]byte(raw))]
			},
			docs: []string{
				`{"name":"t","execution":{"taskSupport":"required"},"Execution":{"taskSupport":"forbidden"}}`,
				`{"name":"t","Execution":{},"execution":{"TaskSupport":"optional","taskSupport":"required"}}`,
			},
			exact:       "required",
			variantOnly: `{"name":"t","Execution":{"TaskSupport":"required"}}`,
			absent:      "callable",
		},
		{
			name: "-32022 error data supported (unsupportedOnly)",
			decode: func(raw string) string {
				st := &callState{rpcErr: true, rpcCode: -32022, rpcData: json.RawMessage(raw)}
				return map[bool]string{true: "unsupported", false: "supported"}[unsupportedOnly(st)]
			},
			docs: []string{
				`{"supported":["2099-01-01"],"Supported":["2025-11-25"]}`,
				`{"SUPPORTED":["2026-07-28"],"supported":["2099-01-01"]}`,
			},
			exact:       "unsupported",
			variantOnly: `{"Supported":["2099-01-01"]}`,
			absent:      "unsupported",
		},
		{
			name: "JSON-RPC response result and error (registry.deliverRaw)",
			decode: func(raw string) string {
				r := &registry{}
				st := &callState{}
				r.bind(idKey(float64(7)), st)
				r.deliverRaw([]byte(raw))
				switch {
				case !st.got:
					return "undelivered"
				case st.rpcErr:
					return "error"
				}
				return string(st.result)
			},
			docs: []string{
				`{"jsonrpc":"2.0","id":7,"result":{"exact":true},"Result":{"exact":false}}`,
				`{"jsonrpc":"2.0","ID":8,"Error":{"code":-1},"Result":{"exact":false},"id":7,"result":{"exact":true}}`,
			},
			exact:       `{"exact":true}`,
			variantOnly: `{"jsonrpc":"2.0","ID":7,"Result":{"exact":false}}`,
			absent:      "undelivered",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, doc := range c.docs {
				if got := c.decode(doc); got != c.exact {
					t.Fatalf("%s read %q, want the exact-case %q", doc, got, c.exact)
				}
			}
			if got := c.decode(c.variantOnly); got != c.absent {
				t.Fatalf("%s read %q, want %q (variant ignored)", c.variantOnly, got, c.absent)
			}
		})
	}
	// A duplicate exact-case member is refused, not resolved by order.
	if _, ok := parseCallResult([]byte(`{"isError":false,"isError":true}`)); ok {
		t.Fatal("duplicate isError accepted")
	}
}

// End to end over a real loopback server: a descriptor that requires tasks under its exact-case
// "execution" and hides it from a case-insensitive reader with a later "Execution" is refused
// ("tasks") and never called; its twin without the requirement is called.
func TestCaseVariantTaskSupportIsRefused(t *testing.T) {
	var calls atomic.Int64
	raw := &mcptest.Raw{Era: mcptest.Modern, Tools: []json.RawMessage{
		json.RawMessage(`{"name":"long_job","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"},"Execution":{"taskSupport":"forbidden"}}`),
		json.RawMessage(`{"name":"echo","inputSchema":{"type":"object"},"Execution":{"taskSupport":"required"}}`),
	}, OnRequest: func(method string, _ json.RawMessage, _ http.Header) {
		if method == "tools/call" {
			calls.Add(1)
		}
	}}
	srv := mcptest.StartRawHTTP(raw)
	defer srv.Close()
	ctx := context.Background()
	s, err := NewClient(nil).Connect(ctx, ServerConfig{HTTP: &HTTPServer{URL: srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.CallTool(ctx, "long_job", json.RawMessage(`{}`))
	var fr *FeatureRefusedError
	if !errors.As(err, &fr) || fr.Feature != "tasks" || calls.Load() != 0 {
		t.Fatalf("long_job: %v after %d calls", err, calls.Load())
	}
	if _, err := s.CallTool(ctx, "echo", json.RawMessage(`{}`)); err != nil || calls.Load() != 1 {
		t.Fatalf("echo: %v after %d calls", err, calls.Load())
	}
}
