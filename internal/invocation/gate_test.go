package invocation_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/invocation"
)

// recordingGate records what it is asked and answers with refuse (nil: run, with a commit that
// fails when commitErr is set).
type recordingGate struct {
	calls     []*invocation.GatedCall
	refuse    error
	commitErr error
	commits   int
}

func (g *recordingGate) Check(_ context.Context, c *invocation.GatedCall) (func(context.Context) error, error) {
	g.calls = append(g.calls, c)
	if g.refuse != nil {
		return nil, g.refuse
	}
	return func(context.Context) error { g.commits++; return g.commitErr }, nil
}

// countToolCalls counts the tools/call requests srv receives.
func countToolCalls(srv *mcp.Server) *atomic.Int32 {
	var n atomic.Int32
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" {
				n.Add(1)
			}
			return next(ctx, method, req)
		}
	})
	return &n
}

// TestGateSeesAdmittedCallsOnly: the Gate is asked only about calls that are authorized, exposed
// and whose arguments passed the schema, with the surface's digests and the caller's approval
// hint; a refusal sends nothing upstream, and so does a failed commit; a passed commit runs right
// before the tools/call.
func TestGateSeesAdmittedCallsOnly(t *testing.T) {
	g := &recordingGate{}
	f := newFixture(t, nil, func(o *invocation.Options) { o.Gate = g })
	sent := countToolCalls(f.srv.Server)
	ctx := context.Background()
	// Refused before the gate: forbidden, schema.
	if _, err := f.s.Call(ctx, mallory, "add", "files", json.RawMessage(`{"a":1,"b":2}`)); err == nil {
		t.Fatal("mallory's call ran")
	}
	if _, err := f.s.Call(ctx, alice, "transfer", "files", json.RawMessage(`{"amount":0,"to":"x"}`)); err == nil {
		t.Fatal("a schema violation ran")
	}
	if len(g.calls) != 0 {
		t.Fatalf("the gate was asked about %d calls that were not admitted", len(g.calls))
	}
	// Admitted: the gate sees the facts and the hint; the commit runs once; the call is sent.
	hint := invocation.ApprovalHint{Request: "apr-1"}
	if _, err := f.s.CallApproved(ctx, alice, "add", "files", json.RawMessage(`{"a":1,"b":2}`), hint); err != nil {
		t.Fatal(err)
	}
	c := g.calls[0]
	if c.Operation != "add" || c.Effect != apiv1.EffectRead || c.Snapshot != f.s.SnapshotDigest() || c.Profile != f.s.ProfileDigest() ||
		c.Approval != hint || c.Target.Name != f.dep.Name || c.Caller.User != alice.User || string(c.Arguments) != `{"a":1,"b":2}` {
		t.Fatalf("gated call %+v", c)
	}
	if g.commits != 1 || sent.Load() != 1 {
		t.Fatalf("%d commits, %d calls sent", g.commits, sent.Load())
	}
	// A refusal and a failed commit send nothing, on both Call and Invoke.
	g.refuse = errors.New("approval_required")
	if _, err := f.s.Call(ctx, alice, "add", "files", json.RawMessage(`{"a":1,"b":2}`)); !errors.Is(err, g.refuse) {
		t.Fatalf("refused: %v", err)
	}
	d := f.describe(t, alice, "add")
	if _, err := f.s.Invoke(ctx, invocation.Request{Caller: alice, Lease: d.Lease, Operation: "add", Connection: "files",
		Arguments: json.RawMessage(`{"a":1,"b":2}`), Approval: hint}); !errors.Is(err, g.refuse) {
		t.Fatalf("refused invoke: %v", err)
	}
	g.refuse, g.commitErr = nil, errors.New("approval_used")
	if _, err := f.s.Call(ctx, alice, "add", "files", json.RawMessage(`{"a":1,"b":2}`)); !errors.Is(err, g.commitErr) {
		t.Fatalf("failed commit: %v", err)
	}
	if sent.Load() != 1 {
		t.Fatalf("%d calls sent, want 1", sent.Load())
	}
	if g.calls[2].Approval != hint {
		t.Fatalf("Invoke did not pass the hint: %+v", g.calls[2].Approval)
	}
}
