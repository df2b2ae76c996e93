package mcpclient

import (
	"errors"
	"fmt"

	"github.com/b10x/connector-mcp/refusal"
)

// Stable refusal names returned by the Refusal methods of this package's errors (read them with
// [refusal.Name]). A refusal decoded by the snapshot package keeps that package's name
// (snapshot.RefusalInvalidJSON, snapshot.RefusalInvalidUTF8, snapshot.RefusalDuplicateKey).
const (
	// RefusalFrameTooLarge: a stdio line, HTTP body or SSE event exceeded Limits.MaxFrameBytes.
	RefusalFrameTooLarge = "frame_too_large"
	// RefusalDescriptorTooLarge: a tool descriptor exceeded Limits.MaxDescriptorBytes.
	RefusalDescriptorTooLarge = "descriptor_too_large"
	// RefusalTooManyPages: tools/list pagination exceeded Limits.MaxPages.
	RefusalTooManyPages = "too_many_pages"
	// RefusalRepeatedCursor: the server repeated a pagination cursor.
	RefusalRepeatedCursor = "repeated_cursor"
	// RefusalTooManyTools: the listing exceeded Limits.MaxTools.
	RefusalTooManyTools = "too_many_tools"
	// RefusalArgumentTooLarge: call arguments exceeded Limits.MaxArgumentBytes.
	RefusalArgumentTooLarge = "argument_too_large"
	// RefusalResultTooLarge: a tools/call result exceeded Limits.MaxResultBytes.
	RefusalResultTooLarge = "result_too_large"
	// RefusalInsufficientScope: the server answered 403 insufficient_scope (ErrInsufficientScope);
	// the name callers show with the scopes of the *TransportError.
	RefusalInsufficientScope = "insufficient_scope"
	// RefusalProbeTimeout: negotiation did not finish within Limits.ProbeTimeout.
	RefusalProbeTimeout = "probe_timeout"
	// RefusalCallTimeout: a request did not finish within Limits.CallTimeout.
	RefusalCallTimeout = "call_timeout"
	// RefusalOAuthTimeout: the exchanges of an authorization the server asked for (discovery,
	// registration, token exchange, refresh) did not finish within Limits.OAuthTimeout.
	RefusalOAuthTimeout = "oauth_timeout"
	// RefusalLoginTimeout: the interactive part of an authorization (the user in a browser) did
	// not finish within Limits.LoginTimeout.
	RefusalLoginTimeout = "login_timeout"
	// RefusalInvalidArguments: call arguments are not one JSON object.
	RefusalInvalidArguments = "invalid_arguments"
	// RefusalInvalidResponse: a response is not the JSON shape the protocol requires.
	RefusalInvalidResponse = "invalid_response"
	// RefusalInsecureTransport: an HTTP server URL is neither https nor loopback.
	RefusalInsecureTransport = "insecure_transport"
	// RefusalCredentialsInURL: a server URL carries userinfo.
	RefusalCredentialsInURL = "credentials_in_url"
	// RefusalUnsupportedProtocol: the server speaks no protocol revision this client supports.
	RefusalUnsupportedProtocol = "unsupported_protocol_version"
	// RefusalInvalidToolHeaders: the tool's x-mcp-header annotations are invalid.
	RefusalInvalidToolHeaders = "invalid_tool_headers"
	// RefusalTooManyRedirects: the HTTP server redirected more often than the client follows
	// (reason ErrInsecureTransport).
	RefusalTooManyRedirects = "too_many_redirects"

	// RefusalSampling: the server sent a sampling/* request (a *FeatureRefusedError).
	RefusalSampling = "sampling"
	// RefusalElicitation: the server sent an elicitation/* request.
	RefusalElicitation = "elicitation"
	// RefusalRoots: the server sent a roots/* request.
	RefusalRoots = "roots"
	// RefusalTasks: task-augmented execution (a tool requiring it, a task result, a tasks/*
	// request).
	RefusalTasks = "tasks"
	// RefusalInputRequired: a tools/call result of resultType "input_required".
	RefusalInputRequired = "input_required"
	// RefusalMultiRound: a multi-round tools/call result of another non-complete resultType.
	RefusalMultiRound = "multi_round"
	// RefusalServerRequest: any other server-to-client request (except ping).
	RefusalServerRequest = "server_request"
)

// maxIdentInError bounds a server-chosen identifier (a tool name) in an error message.
const maxIdentInError = 64

// Sentinel reasons, matched with errors.Is. Every refusal of this package is a *RefusalError or a
// *FeatureRefusedError whose Unwrap returns one of these.
var (
	// ErrFrameTooLarge: a stdio line, HTTP response body or SSE event exceeded Limits.MaxFrameBytes
	// (refusal "frame_too_large").
	ErrFrameTooLarge = errors.New("frame too large")
	// ErrDescriptorTooLarge: one tool descriptor exceeded Limits.MaxDescriptorBytes
	// (refusal "descriptor_too_large").
	ErrDescriptorTooLarge = errors.New("tool descriptor too large")
	// ErrTooManyPages: tools/list pagination exceeded Limits.MaxPages (refusal "too_many_pages").
	ErrTooManyPages = errors.New("too many pages")
	// ErrRepeatedCursor: the server returned a pagination cursor it had already returned
	// (refusal "repeated_cursor").
	ErrRepeatedCursor = errors.New("repeated pagination cursor")
	// ErrTooManyTools: the listing exceeded Limits.MaxTools (refusal "too_many_tools").
	ErrTooManyTools = errors.New("too many tools")
	// ErrArgumentTooLarge: call arguments exceeded Limits.MaxArgumentBytes
	// (refusal "argument_too_large").
	ErrArgumentTooLarge = errors.New("arguments too large")
	// ErrResultTooLarge: a tools/call result exceeded Limits.MaxResultBytes
	// (refusal "result_too_large"). A result is never truncated.
	ErrResultTooLarge = errors.New("result too large")
	// ErrProbeTimeout: negotiation did not finish within Limits.ProbeTimeout, also after the legacy
	// fallback (refusal "probe_timeout").
	ErrProbeTimeout = errors.New("protocol negotiation timed out")
	// ErrCallTimeout: a request did not finish within Limits.CallTimeout (refusal "call_timeout").
	ErrCallTimeout = errors.New("call timed out")
	// ErrOAuthTimeout: the exchanges of an authorization the server asked for did not finish
	// within Limits.OAuthTimeout (refusal "oauth_timeout").
	ErrOAuthTimeout = errors.New("authorization exchanges timed out")
	// ErrLoginTimeout: the interactive part of an authorization did not finish within
	// Limits.LoginTimeout (refusal "login_timeout").
	ErrLoginTimeout = errors.New("interactive login timed out")
	// ErrInvalidArguments: call arguments are not one JSON object (refusal "invalid_arguments").
	ErrInvalidArguments = errors.New("invalid arguments")
	// ErrInvalidResponse: a response is not the JSON shape the protocol requires
	// (refusal "invalid_response").
	ErrInvalidResponse = errors.New("invalid response")
	// ErrInsecureTransport: an HTTP server URL is neither https nor loopback
	// (refusal "insecure_transport").
	ErrInsecureTransport = errors.New("insecure transport")
	// ErrCredentialsInURL: a server URL carries userinfo; configuration names credential sources,
	// never values (refusal "credentials_in_url").
	ErrCredentialsInURL = errors.New("credentials in URL")
	// ErrUnsupportedProtocol: the server speaks no protocol revision this client supports
	// (refusal "unsupported_protocol_version").
	ErrUnsupportedProtocol = errors.New("unsupported protocol version")
	// ErrInvalidToolHeaders: the tool's x-mcp-header annotations are invalid, so it cannot be
	// called correctly (refusal "invalid_tool_headers").
	ErrInvalidToolHeaders = errors.New("invalid tool header annotations")
	// ErrFeatureRefused is the reason of every *FeatureRefusedError.
	ErrFeatureRefused = errors.New("feature refused")

	// ErrInvalidConfig: the server configuration is incomplete or contradictory.
	ErrInvalidConfig = errors.New("invalid server configuration")
	// ErrConnectionClosed: the connection broke or the server process exited.
	ErrConnectionClosed = errors.New("connection closed")
	// ErrExchangeFailed: an HTTP exchange failed before a response (dial, reset, timeout of the
	// HTTP client).
	ErrExchangeFailed = errors.New("HTTP exchange failed")
	// ErrTLS: the server's TLS certificate could not be verified.
	ErrTLS = errors.New("TLS verification failed")
	// ErrHTTPStatus: the server answered with an unexpected HTTP status.
	ErrHTTPStatus = errors.New("unexpected HTTP status")
	// ErrUnauthorized: the server answered 401; it requires authorization this client did not
	// present (for mcpctl: run "mcpctl login --url URL" first).
	ErrUnauthorized = errors.New("server requires authorization")
	// ErrInsufficientScope: the server answered 403 with a Bearer challenge
	// error="insufficient_scope" (RFC 6750 §3.1): the credential lacks a scope. The
	// *TransportError's Scopes name what the server asked for; nothing escalates by itself.
	ErrInsufficientScope = errors.New("server requires a scope the credential lacks")
	// ErrServerError: the server answered a request with a JSON-RPC error.
	ErrServerError = errors.New("server returned a JSON-RPC error")
	// ErrToolError: the tool result has isError set; see *ToolError.
	ErrToolError = errors.New("tool returned an error result")
	// ErrSpawn: the stdio server process could not be started.
	ErrSpawn = errors.New("cannot start server process")
)

// RefusalError is a named refusal: a bound was hit, or the configuration or a response was refused.
// It never carries request or response bodies, headers, tokens, session ids or server prose.
type RefusalError struct {
	// Name is the stable refusal name, e.g. "frame_too_large".
	Name string
	// Op is the operation that was refused, e.g. "tools/list".
	Op string
	// Limit is the configured bound that was exceeded, when the refusal is a bound.
	Limit int64
	// Err is the sentinel reason (ErrFrameTooLarge, ...).
	Err error
}

// Refusal returns the stable refusal name.
func (e *RefusalError) Refusal() string { return e.Name }

// Unwrap returns the sentinel reason.
func (e *RefusalError) Unwrap() error { return e.Err }

// Error describes the failure without server text.
func (e *RefusalError) Error() string {
	msg := "mcpclient: "
	if e.Op != "" {
		msg += e.Op + ": "
	}
	msg += "refused: " + e.Name
	if e.Limit > 0 {
		msg += fmt.Sprintf(" (limit %d)", e.Limit)
	}
	return msg
}

func refuse(name, op string, limit int64, reason error) *RefusalError {
	return &RefusalError{Name: name, Op: op, Limit: limit, Err: reason}
}

// FeatureRefusedError reports a protocol feature this tools-only client refuses by design:
// "sampling", "elicitation", "roots" (server-to-client requests), "input_required" and
// "multi_round" (multi-round tool results), "tasks" (task-augmented execution), and similar.
type FeatureRefusedError struct {
	// Feature is the refused feature's name, also the refusal name.
	Feature string
	// Op is the operation during which the feature was requested, e.g. "tools/call".
	Op string
}

// Refusal returns the feature name.
func (e *FeatureRefusedError) Refusal() string { return e.Feature }

// Unwrap returns ErrFeatureRefused.
func (e *FeatureRefusedError) Unwrap() error { return ErrFeatureRefused }

// Error describes the failure without server text.
func (e *FeatureRefusedError) Error() string {
	if e.Op == "" {
		return "mcpclient: refused: " + e.Feature
	}
	return "mcpclient: " + e.Op + ": refused: " + e.Feature
}

// ToolError is a tools/call result with "isError": true. Result is the complete result JSON as
// received (lossless); it is server content, so it is not part of Error().
type ToolError struct {
	// Tool is the called tool's name.
	Tool string
	// Result is the whole result object exactly as received.
	Result []byte
}

// Unwrap returns ErrToolError.
func (e *ToolError) Unwrap() error { return ErrToolError }

// Error describes the failure without server text.
func (e *ToolError) Error() string {
	return fmt.Sprintf("mcpclient: tools/call %q: tool returned isError", refusal.Clip(e.Tool, maxIdentInError))
}

// ServerError is a JSON-RPC error response. Only the numeric code is kept: the message and data are
// server prose and never surface.
type ServerError struct {
	// Op is the request method, e.g. "tools/call".
	Op string
	// Code is the JSON-RPC error code.
	Code int64
}

// Unwrap returns ErrServerError.
func (e *ServerError) Unwrap() error { return ErrServerError }

// Error describes the failure without server text.
func (e *ServerError) Error() string {
	return fmt.Sprintf("mcpclient: %s: server returned JSON-RPC error %d", e.Op, e.Code)
}

// TransportError is a failure to exchange messages (connection closed, process exit, HTTP status).
// Its message names only the operation and the HTTP status, never bodies or headers.
type TransportError struct {
	// Op is the request method or step, e.g. "connect" or "tools/list".
	Op string
	// Status is the HTTP status, when one was received and is the reason.
	Status int
	// Err is the sentinel reason (ErrConnectionClosed, ErrHTTPStatus, ErrSpawn, ...).
	Err error
	// Cause is, for ErrExchangeFailed, the class of the network failure (internal/netcause:
	// "dns", "connection_refused", "connection_reset", "timeout", "tls", "unreachable"), or ""
	// when none applies. It never carries an address or the underlying error's text.
	Cause string
	// Scopes are, for ErrInsufficientScope, the scopes the server's challenge named: each a
	// valid RFC 6749 scope-token of at most 128 bytes, at most 16 of them; empty when the
	// challenge named none or anything else.
	Scopes []string
}

// Bounds of the scopes read from an insufficient_scope challenge: a server's challenge is
// untrusted text, so only short, well-formed scope tokens are kept.
const (
	maxChallengeScopes   = 16
	maxChallengeScopeLen = 128
)

// Unwrap returns the sentinel reason.
func (e *TransportError) Unwrap() error { return e.Err }

// Error describes the failure without server text.
func (e *TransportError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("mcpclient: %s: %v %d", e.Op, e.Err, e.Status)
	}
	if e.Cause != "" {
		return fmt.Sprintf("mcpclient: %s: %v (%s)", e.Op, e.Err, e.Cause)
	}
	return fmt.Sprintf("mcpclient: %s: %v", e.Op, e.Err)
}

// Every refusal of this package has the shared shape.
var (
	_ refusal.Named = (*RefusalError)(nil)
	_ refusal.Named = (*FeatureRefusedError)(nil)
)
