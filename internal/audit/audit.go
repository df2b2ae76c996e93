// Package audit writes connector-mcp's audit trail: one JSON line per activation decision of the
// manager (and, from the gateway, per call), in a versioned schema (docs/observability.md#audit)
// that a security team can keep and query. A record holds names, digests, durations and outcome
// names by construction — its fields have no room for arguments, results, tokens, Secret values
// or anything an MCP server or registry wrote.
package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Version is the schema version every record carries in "v". A field is only ever added; a
// renamed or removed field makes a new version.
const Version = 1

// Kinds of records.
const (
	// KindActivation is a manager decision: an object became Ready, or was refused (with the
	// condition reason), or its drift was recorded.
	KindActivation = "activation"
	// KindCall is a gateway request.
	KindCall = "call"
)

// Record is one audit line. Empty fields are left out.
type Record struct {
	V    int       `json:"v"`
	Time time.Time `json:"time"`
	Kind string    `json:"kind"`
	// RequestID is the gateway's id of the request (also in the trace and in a refused caller's
	// error data); TraceID the W3C trace id when the request or pass was traced.
	RequestID string `json:"requestId,omitempty"`
	TraceID   string `json:"traceId,omitempty"`
	// Caller is the authenticated identity (system:serviceaccount:NS:NAME).
	Caller string `json:"caller,omitempty"`
	// Object is the kind decided on (ServiceDeployment, McpServiceProfile); Namespace and Name
	// name it; Generation is the one decided on.
	Object     string `json:"object,omitempty"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name,omitempty"`
	Generation int64  `json:"generation,omitempty"`
	// Operation and Effect are the reviewed operation called and its reviewed effect.
	Operation string `json:"operation,omitempty"`
	Effect    string `json:"effect,omitempty"`
	// SnapshotDigest and ProfileDigest are the reviewed snapshot and profile document in force
	// (for a refused activation: the candidate the live server showed, when there is one).
	SnapshotDigest  string `json:"snapshotDigest,omitempty"`
	ProfileDigest   string `json:"profileDigest,omitempty"`
	CandidateDigest string `json:"candidateDigest,omitempty"`
	// Outcome is "ok" for a call answered, a condition reason for an activation decision
	// (Activated, Verified, SnapshotDrift, EndpointRefused...), else the refusal name.
	Outcome string `json:"outcome"`
	// Refusal is the stable refusal name under Outcome, when there is one.
	Refusal string `json:"refusal,omitempty"`
	// UpstreamStatus is the class of the upstream's answer: "2xx", "4xx", "5xx" or "none".
	UpstreamStatus  string   `json:"upstreamStatus,omitempty"`
	LeaseAgeSeconds *float64 `json:"leaseAgeSeconds,omitempty"`
	DurationSeconds *float64 `json:"durationSeconds,omitempty"`
}

// Seconds is a duration as a record's seconds field.
func Seconds(d time.Duration) *float64 {
	s := d.Seconds()
	return &s
}

// ErrInvalidSink is returned (wrapped) by Open for a sink it does not know.
var ErrInvalidSink = errors.New("audit: invalid sink")

// Logger writes records as JSON lines to its sink, one line per Write, in order; safe for
// concurrent use. A nil *Logger writes nothing.
type Logger struct {
	mu    sync.Mutex
	w     io.Writer
	close func() error
	now   func() time.Time
}

// Open returns the logger of sink: "stdout" (also ""), "stderr", "none", or "file:PATH" (appended
// to, created with mode 0600). stdout and stderr are the process's. A webhook sink
// ("https://HOST/PATH", IsWebhook) needs the binary's egress client: New(NewWebhook(...)).
func Open(sink string) (*Logger, error) {
	switch {
	case sink == "" || sink == "stdout":
		return New(os.Stdout), nil
	case sink == "stderr":
		return New(os.Stderr), nil
	case sink == "none":
		return nil, nil
	case strings.HasPrefix(sink, "file:") && len(sink) > len("file:"):
		f, err := os.OpenFile(strings.TrimPrefix(sink, "file:"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidSink, err)
		}
		l := New(f)
		l.close = f.Close
		return l, nil
	case IsWebhook(sink):
		return nil, fmt.Errorf("%w: a webhook sink is built with its egress client (NewWebhook)", ErrInvalidSink)
	}
	return nil, fmt.Errorf("%w: %q (stdout, stderr, none, file:PATH or https://HOST/PATH)", ErrInvalidSink, clip(sink))
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// New returns a logger writing to w.
func New(w io.Writer) *Logger { return &Logger{w: w, now: time.Now} }

// Write writes r as one line, with V and (when zero) Time set.
func (l *Logger) Write(r Record) error {
	if l == nil {
		return nil
	}
	r.V = Version
	if r.Time.IsZero() {
		r.Time = l.now().UTC()
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err = l.w.Write(append(b, '\n'))
	return err
}

// Close closes a file sink.
func (l *Logger) Close() error {
	if l == nil || l.close == nil {
		return nil
	}
	return l.close()
}
