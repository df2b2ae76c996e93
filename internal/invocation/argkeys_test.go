package invocation_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/b10x/connector-mcp/internal/invocation"
	"github.com/b10x/connector-mcp/internal/mcptest"
)

// payTool bounds "amount" and lets other members through (as most real schemas do).
var payTool = &mcp.Tool{Name: "pay", Description: "Pay an amount.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"amount":{"type":"integer","maximum":100},"items":{"type":"array"},"meta":{"type":"object"}},"required":["amount"]}`)}

// payArgs is how an upstream written in Go reads the arguments: encoding/json matches member
// names case-insensitively, and the last match wins.
type payArgs struct {
	Amount int `json:"amount"`
}

// Item 9a: arguments holding member names that collide under case folding are refused
// invalid_arguments (keyword ambiguousKeys, the pointer of the object) before the call, at the
// top level and in nested objects; a counting upstream proves nothing was sent. The upstream
// would otherwise have read the member the schema never validated.
func TestAmbiguousArgumentKeysRefused(t *testing.T) {
	f := newFixtureWith(t, append(mcptest.DefaultTools(), payTool), nil, nil)
	var sent atomic.Int64
	var read atomic.Int64
	f.srv.Server.AddTool(payTool, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		sent.Add(1)
		var a payArgs
		_ = json.Unmarshal(req.Params.Arguments, &a)
		read.Store(int64(a.Amount))
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "paid"}}}, nil
	})
	d := f.describe(t, alice, "pay")
	invoke := func(args string) error {
		_, err := f.s.Invoke(context.Background(), invocation.Request{Caller: alice, Lease: d.Lease, Operation: "pay",
			Connection: "files", Arguments: json.RawMessage(args)})
		return err
	}
	// The threat is real: a Go upstream reads the unvalidated "Amount".
	var a payArgs
	if err := json.Unmarshal([]byte(`{"amount":5,"Amount":1000000}`), &a); err != nil || a.Amount != 1000000 {
		t.Fatalf("encoding/json read %d (%v); the premise of this test does not hold", a.Amount, err)
	}
	if !strings.EqualFold("k", "\u212a") || !strings.EqualFold("s", "\u017f") {
		t.Fatal("simple folding premise does not hold")
	}
	for _, c := range []struct{ name, args, pointer string }{
		{"top level", `{"amount":5,"Amount":1000000}`, ""},
		{"upper case", `{"AMOUNT":1000000,"amount":5}`, ""},
		{"kelvin sign", `{"amount":5,"\u212aey":1,"key":2}`, ""},
		{"long s", `{"amount":5,"\u017fum":1,"SUM":2}`, ""},
		{"nested object", `{"amount":5,"meta":{"note":"a","NOTE":"b"}}`, "/meta"},
		{"object in array", `{"amount":5,"items":[{"id":1},{"id":1,"Id":2}]}`, "/items/1"},
		{"deep", `{"amount":5,"meta":{"a/b":{"x":[{"y":{"Zz":1,"zZ":2}}]}}}`, "/meta/a~1b/x/0/y"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := sent.Load()
			err := invoke(c.args)
			var iae *invocation.InvalidArgumentsError
			if !errors.As(err, &iae) || refusal(err) != invocation.RefusalInvalidArguments ||
				iae.Keyword != invocation.KeywordAmbiguousKeys || iae.Pointer != c.pointer {
				t.Fatalf("%s: %v (%+v), want invalid_arguments %s at %q", c.args, err, iae, invocation.KeywordAmbiguousKeys, c.pointer)
			}
			if n := sent.Load() - before; n != 0 {
				t.Fatalf("%d tools/call reached the server", n)
			}
			if strings.Contains(err.Error(), "1000000") {
				t.Fatalf("the error echoes a value: %v", err)
			}
		})
	}
	// Twins: names that differ beyond case are called, and the upstream reads the validated value.
	for _, args := range []string{`{"amount":5}`, `{"amount":5,"amounts":1,"meta":{"note":"a","notes":"b"}}`,
		`{"amount":5,"items":[{"id":1},{"Id":2}]}`, `{"amount":5,"k\u0301":1,"k":2}`} {
		before := sent.Load()
		if err := invoke(args); err != nil || sent.Load()-before != 1 || read.Load() != 5 {
			t.Fatalf("%s: %v, %d sent, read %d; want it sent with amount 5", args, err, sent.Load()-before, read.Load())
		}
	}
	// Call (the deployment route) refuses the same way.
	before := sent.Load()
	_, err := f.s.Call(context.Background(), alice, "pay", "files", json.RawMessage(`{"amount":5,"Amount":1000000}`))
	var iae *invocation.InvalidArgumentsError
	if !errors.As(err, &iae) || iae.Keyword != invocation.KeywordAmbiguousKeys || sent.Load() != before {
		t.Fatalf("Call: %v, %d sent", err, sent.Load()-before)
	}
}
