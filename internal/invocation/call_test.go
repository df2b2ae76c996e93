package invocation_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/b10x/connector-mcp/internal/invocation"
)

// TestCallIsDescribeThenInvoke: Call answers what Describe followed by Invoke with the described
// lease answers, with one authorization and one audit event ("invoke").
func TestCallIsDescribeThenInvoke(t *testing.T) {
	var audits []invocation.AuditEvent
	f := newFixture(t, nil, func(o *invocation.Options) {
		o.Audit = func(_ context.Context, e invocation.AuditEvent) { audits = append(audits, e) }
	})
	ctx := context.Background()
	reviews := f.api.count()
	res, err := f.s.Call(ctx, alice, "add", "files", json.RawMessage(`{"a":2,"b":40}`))
	if err != nil {
		t.Fatal(err)
	}
	if res.Operation != "add" || res.Snapshot != f.doc.Snapshot.Digest || !strings.Contains(string(res.JSON), `"text":"42"`) {
		t.Fatalf("result = %+v %s", res, res.JSON)
	}
	d := f.describe(t, alice, "add")
	viaLease, err := f.s.Invoke(ctx, invocation.Request{Caller: alice, Lease: d.Lease, Operation: "add", Connection: "files",
		Arguments: json.RawMessage(`{"a":2,"b":40}`)})
	if err != nil || string(viaLease.JSON) != string(res.JSON) {
		t.Fatalf("describe+invoke = %s, %v; call = %s", viaLease.JSON, err, res.JSON)
	}
	if n := f.api.count() - reviews; n != 3 { // Call: 1; Describe: 1; Invoke: 1
		t.Fatalf("%d reviews, want 3 (one for Call)", n)
	}
	if len(audits) != 3 || audits[0].Action != "invoke" || audits[0].Outcome != "ok" || audits[0].Operation != "add" {
		t.Fatalf("audits = %+v", audits)
	}
}

// TestCallRefusals is the twin: each refusal of Describe and Invoke is Call's too, by name.
func TestCallRefusals(t *testing.T) {
	f := newFixture(t, []string{"read_file"}, nil)
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		caller     invocation.Caller
		op, conn   string
		args       string
		want       string
		wantSentry error
	}{
		{"invalid caller", invocation.Caller{User: alice.User}, "echo", "files", `{}`, "invalid_caller", invocation.ErrInvalidCaller},
		{"wrong connection", alice, "echo", "other", `{}`, "wrong_connection", invocation.ErrWrongConnection},
		{"forbidden", mallory, "echo", "files", `{}`, "forbidden", invocation.ErrForbidden},
		{"hidden", alice, "read_file", "files", `{}`, "not_exposed", invocation.ErrNotExposed},
		{"unknown", alice, "nope", "files", `{}`, "not_exposed", invocation.ErrNotExposed},
		{"schema", alice, "transfer", "files", `{"amount":0,"to":"x"}`, "invalid_arguments", nil},
		{"not an object", alice, "echo", "files", `[1]`, "invalid_arguments", nil},
		{"oversize", alice, "echo", "files", `{"text":"` + strings.Repeat("a", 2<<20) + `"}`, "argument_too_large", invocation.ErrArgumentTooLarge},
		{"tool error", alice, "fail", "files", `{}`, "tool_error", nil},
	} {
		_, err := f.s.Call(ctx, tc.caller, tc.op, tc.conn, json.RawMessage(tc.args))
		if refusal(err) != tc.want && invocation.Outcome(err) != tc.want {
			t.Fatalf("%s: %v, want %s", tc.name, err, tc.want)
		}
		if tc.wantSentry != nil && !errors.Is(err, tc.wantSentry) {
			t.Fatalf("%s: %v is not %v", tc.name, err, tc.wantSentry)
		}
	}
}
