package invocation

import (
	"context"
	"errors"
	"strconv"
	"time"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/mcpclient"
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
	// Snapshot is the surface's frozen snapshot digest; Profile its reviewed profile digest.
	Snapshot, Profile string
	// Effect is the reviewed effect of the operation ("" for "list" and an operation not exposed).
	Effect apiv1.Effect
	// Upstream is the class of the upstream's answer to an "invoke": UpstreamNone (nothing was
	// sent: refused before, or the session could not be opened), "2xx" (a result or a tool
	// error), "4xx" or "5xx" (the HTTP status that failed the exchange), UpstreamFailed (the
	// exchange failed without a status: connection, timeout, protocol). "" for describe and list.
	Upstream string
	// Outcome is "ok", a refusal name (e.g. "forbidden", "stale_lease", "tool_error", or a
	// refusal of egress or mcpclient such as "destination_refused"), "authorization_unavailable"
	// or "call_failed".
	Outcome string
	// Duration is how long the request took (Options.Clock).
	Duration time.Duration
	// UpstreamDuration is the part of Duration spent in the upstream exchange of an "invoke"
	// (opening the session when one was needed, and the tools/call); zero when nothing was sent.
	UpstreamDuration time.Duration
	// LeaseAge is the age of the activation the request ran under: how long before it the live
	// server was last verified against the snapshot (status.lastFrozenTime); HasLeaseAge is false
	// when the deployment recorded no such time.
	LeaseAge    time.Duration
	HasLeaseAge bool
}

// Upstream status classes of AuditEvent.Upstream besides "2xx", "4xx" and "5xx".
const (
	UpstreamNone   = "none"
	UpstreamFailed = "failed"
)

// exchange is what an invoke learned on its way, for its audit event: the reviewed effect of the
// operation, the upstream status class and the time the upstream exchange took.
type exchange struct {
	effect       apiv1.Effect
	upstream     string
	upstreamTime time.Duration
}

// upstreamClass is the upstream status class of a tools/call's error (nil: answered).
func upstreamClass(err error) string {
	var te *mcpclient.ToolError
	var re *mcpclient.RefusalError
	var tr *mcpclient.TransportError
	switch {
	case err == nil, errors.As(err, &te), errors.As(err, &re):
		// A result, a tool error, or an answer the client refused to take (too large): the
		// upstream answered.
		return "2xx"
	case errors.As(err, &tr) && tr.Status >= 400 && tr.Status < 600:
		return strconv.Itoa(tr.Status/100) + "xx"
	}
	return UpstreamFailed
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
// (x: the invoke's exchange; nil for describe and list).
func (s *Surface) audit(ctx context.Context, action string, caller Caller, operation, connection string, x *exchange, start time.Time, err error) {
	if s.opts.Audit == nil {
		return
	}
	e := AuditEvent{
		Action: action, Target: s.target, User: caller.User, Seed: caller.Seed,
		Operation: clip(operation), Connection: clip(connection), Snapshot: s.digest, Profile: s.profile,
		Outcome: Outcome(err), Duration: s.opts.Clock.Since(start),
	}
	if !s.verified.IsZero() {
		e.LeaseAge, e.HasLeaseAge = s.opts.Clock.Since(s.verified), true
	}
	if x != nil {
		e.Effect, e.Upstream, e.UpstreamDuration = x.effect, x.upstream, x.upstreamTime
		if e.Upstream == "" {
			e.Upstream = UpstreamNone
		}
	}
	s.opts.Audit(ctx, e)
}
