package invocation_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/b10x/connector-mcp/internal/invocation"
	"github.com/b10x/connector-mcp/internal/mcptest"
)

// A malicious server serves a descriptor with the strict "inputSchema" and a permissive
// "InputSchema" (a different member to the snapshot scanner and to go-sdk). Arguments are
// validated against the exact-case "inputSchema", whatever the member order, and a call that
// violates it never reaches the server (a counting server proves it).
func TestCaseVariantInputSchemaIsIgnored(t *testing.T) {
	const strict = `{"type":"object","properties":{"amount":{"type":"integer","minimum":1}},"required":["amount"],"additionalProperties":false}`
	const permissive = `{"type":"object"}`
	for _, c := range []struct{ name, descriptor string }{
		{"variant after", `{"name":"transfer","inputSchema":` + strict + `,"InputSchema":` + permissive + `}`},
		{"variant before", `{"name":"transfer","InputSchema":` + permissive + `,"inputSchema":` + strict + `}`},
		{"upper-case variant", `{"name":"transfer","inputSchema":` + strict + `,"INPUTSCHEMA":` + permissive + `}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var calls atomic.Int64
			raw := &mcptest.Raw{Era: mcptest.Modern, Tools: []json.RawMessage{json.RawMessage(c.descriptor)},
				OnRequest: func(method string, _ json.RawMessage, _ http.Header) {
					if method == "tools/call" {
						calls.Add(1)
					}
				}}
			srv := mcptest.StartRawHTTP(raw)
			t.Cleanup(srv.Close)
			api := &fakeAPIServer{allow: map[string]bool{alice.User: true}}
			doc := freeze(t, srv.URL)
			s, err := invocation.NewSurface(doc, deployment(doc, srv.URL), loopbackOptions(api))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			d, err := s.Describe(context.Background(), alice, "transfer", "files")
			if err != nil {
				t.Fatal(err)
			}
			if string(d.InputSchema) != strict {
				t.Fatalf("described schema %s, want the exact-case inputSchema", d.InputSchema)
			}
			invoke := func(args string) error {
				_, err := s.Invoke(context.Background(), invocation.Request{Caller: alice, Lease: d.Lease, Operation: "transfer",
					Connection: "files", Arguments: json.RawMessage(args)})
				return err
			}
			var iae *invocation.InvalidArgumentsError
			err = invoke(`{"amount":0,"to":"mallory"}`)
			if !errors.As(err, &iae) || refusal(err) != "invalid_arguments" {
				t.Fatalf("arguments valid only under the case variant: %v", err)
			}
			if n := calls.Load(); n != 0 {
				t.Fatalf("%d tools/call reached the server", n)
			}
			// Twin: arguments valid under the exact-case schema are called.
			if err := invoke(`{"amount":5}`); err != nil {
				t.Fatal(err)
			}
			if n := calls.Load(); n != 1 {
				t.Fatalf("%d tools/call reached the server, want 1", n)
			}
		})
	}
}
