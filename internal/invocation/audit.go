package invocation

import (
	"context"
	"errors"
	"time"

	"github.com/b10x/connector-mcp/refusal"
)

// AuditEvent is one Describe or Invoke as an audit log or metrics would record it. It names who
// asked for what and the outcome; it never holds arguments, results, tokens or server prose.
type AuditEvent struct {
	// Action is "describe", "list" or "invoke".
	Action string
	// Target is the ServiceDeployment.
	Target Target
	// User is the caller's user name; Seed its authority seed.
	User, Seed string
	// Operation and Connection are what the request named (no operation for "list").
	Operation, Connection string
	// Snapshot is the surface's frozen snapshot digest.
	Snapshot string
	// Outcome is "ok", a refusal name (e.g. "forbidden", "stale_lease", "tool_error", or a
	// refusal of egress or mcpclient such as "destination_refused"), "authorization_unavailable"
	// or "call_failed".
	Outcome string
	// Duration is how long the request took (Options.Clock).
	Duration time.Duration
}

// Outcome names the outcome of err as AuditEvent.Outcome does.
func Outcome(err error) string {
	if err == nil {
		return "ok"
	}
	if name := refusal.Name(err); name != "" {
		return name
	}
	switch {
	case errors.Is(err, ErrAuthorizationUnavailable):
		return "authorization_unavailable"
	}
	return "call_failed"
}

// audit reports one request to Options.Audit, if set.
func (s *Surface) audit(ctx context.Context, action string, caller Caller, operation, connection string, start time.Time, err error) {
	if s.opts.Audit == nil {
		return
	}
	s.opts.Audit(ctx, AuditEvent{
		Action: action, Target: s.target, User: caller.User, Seed: caller.Seed,
		Operation: clip(operation), Connection: clip(connection), Snapshot: s.digest,
		Outcome: Outcome(err), Duration: s.opts.Clock.Since(start),
	})
}
