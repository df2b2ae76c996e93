package invocation_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/b10x/connector-mcp/internal/invocation"
)

func TestAudit(t *testing.T) {
	var mu sync.Mutex
	var events []invocation.AuditEvent
	f := newFixture(t, []string{"read_file"}, func(o *invocation.Options) {
		o.Audit = func(_ context.Context, e invocation.AuditEvent) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, e)
		}
	})
	ctx := context.Background()
	d := f.describe(t, alice, "echo")
	invoke := func(c invocation.Caller, lease, op string) {
		_, _ = f.s.Invoke(ctx, invocation.Request{Caller: c, Lease: lease, Operation: op, Connection: "files",
			Arguments: json.RawMessage(`{"text":"argument-value-xyz"}`)})
	}
	invoke(alice, d.Lease, "echo")
	invoke(alice, "stale", "echo")
	invoke(mallory, d.Lease, "echo")
	invoke(alice, d.Lease, "read_file")
	fd := f.describe(t, alice, "fail")
	invoke(alice, fd.Lease, "fail")
	want := []string{
		"describe echo ok", "invoke echo ok", "invoke echo stale_lease", "invoke echo forbidden",
		"invoke read_file not_exposed", "describe fail ok", "invoke fail tool_error",
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != len(want) {
		t.Fatalf("%d events, want %d: %+v", len(events), len(want), events)
	}
	for i, e := range events {
		if got := e.Action + " " + e.Operation + " " + e.Outcome; got != want[i] {
			t.Fatalf("event %d: %q, want %q", i, got, want[i])
		}
		if e.Target.Name != "files" || e.Snapshot != f.doc.Snapshot.Digest || e.Connection != "files" || e.Duration < 0 {
			t.Fatalf("event %d: %+v", i, e)
		}
		if strings.Contains(fmt.Sprintf("%+v", e), "argument-value-xyz") {
			t.Fatalf("arguments in the audit event: %+v", e)
		}
	}
	if events[3].User != mallory.User || events[3].Seed != mallory.Seed {
		t.Fatalf("forbidden event names %q %q", events[3].User, events[3].Seed)
	}
}

func TestOutcome(t *testing.T) {
	cases := map[string]error{
		"ok":                        nil,
		"stale_lease":               &invocation.RefusalError{Name: "stale_lease", Err: invocation.ErrStaleLease},
		"authorization_unavailable": &invocation.AuthorizationError{Err: errors.New("x")},
		"call_failed":               &invocation.CallError{Err: errors.New("x")},
		"live_drift":                &invocation.DriftError{},
	}
	for want, err := range cases {
		if got := invocation.Outcome(err); got != want {
			t.Fatalf("Outcome(%v) = %q, want %q", err, got, want)
		}
	}
}
