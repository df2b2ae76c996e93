package invocation

import (
	"errors"
	"fmt"

	"github.com/b10x/connector-mcp/argschema"
	"github.com/b10x/connector-mcp/mcpclient"
	"github.com/b10x/connector-mcp/refusal"
)

// Refusal names, stable and snake_case. Every refusal of this package returns one of them from
// its Refusal method.
const (
	// RefusalInvalidSurface means the profile document or the deployment cannot form a surface.
	RefusalInvalidSurface = "invalid_surface"
	// RefusalNotActive means the deployment is not Ready, its current generation is not activated, or
	// its active snapshot digest is not the profile's recorded one.
	RefusalNotActive = "not_active"
	// RefusalInvalidCaller means the caller has no user name or no authority seed, or a value is not
	// valid UTF-8.
	RefusalInvalidCaller = "invalid_caller"
	// RefusalWrongConnection means the request names another Connection than the surface's.
	RefusalWrongConnection = "wrong_connection"
	// RefusalNotExposed means the operation is unknown or not exposed by the deployment.
	RefusalNotExposed = "not_exposed"
	// RefusalForbidden means the SubjectAccessReview did not allow the caller to invoke.
	RefusalForbidden = "forbidden"
	// RefusalStaleLease means the lease was not issued for this snapshot, caller seed, operation and
	// Connection.
	RefusalStaleLease = "stale_lease"
	// RefusalInvalidSchema means the frozen input schema of the operation does not compile (or needs
	// a remote reference).
	RefusalInvalidSchema = "invalid_schema"
	// RefusalInvalidArguments means the arguments are not one JSON object or violate the frozen
	// input schema.
	RefusalInvalidArguments = "invalid_arguments"
	// RefusalArgumentTooLarge means the arguments exceed the surface's argument bound.
	RefusalArgumentTooLarge = "argument_too_large"
	// RefusalResultTooLarge means the result exceeds the surface's result bound.
	RefusalResultTooLarge = "result_too_large"
	// RefusalToolError means the tool answered with "isError": true.
	RefusalToolError = "tool_error"
	// RefusalLiveDrift means the live server's tool list no longer equals the frozen snapshot.
	RefusalLiveDrift = "live_drift"
	// RefusalInsufficientScope means the upstream answered 403 with an insufficient_scope
	// challenge: the deployment's credential lacks a scope. A human logs in again with it (the
	// manager's freeze names the scope in the deployment's condition); nothing escalates.
	RefusalInsufficientScope = mcpclient.RefusalInsufficientScope
)

var (
	// ErrInvalidSurface means the profile document or deployment cannot form a surface.
	ErrInvalidSurface = errors.New("invalid surface")
	// ErrNotActive means the deployment's active snapshot is not the profile's, or it is not Ready.
	ErrNotActive = errors.New("deployment not active for this snapshot")
	// ErrInvalidCaller means the caller identity is incomplete or not valid UTF-8.
	ErrInvalidCaller = errors.New("invalid caller")
	// ErrWrongConnection means the request names another Connection.
	ErrWrongConnection = errors.New("wrong connection")
	// ErrNotExposed means the operation is unknown or not exposed.
	ErrNotExposed = errors.New("operation not exposed")
	// ErrForbidden means the caller may not invoke this deployment.
	ErrForbidden = errors.New("forbidden")
	// ErrStaleLease means the lease does not match this snapshot, caller seed, operation and Connection.
	ErrStaleLease = errors.New("stale lease")
	// ErrInvalidSchema means the frozen input schema does not compile.
	ErrInvalidSchema = argschema.ErrInvalidSchema
	// ErrRemoteReference means the input schema refers to a resource outside itself; nothing is ever
	// loaded from a file or the network.
	ErrRemoteReference = argschema.ErrRemoteReference
	// ErrInvalidArguments means the arguments are not a JSON object or violate the input schema.
	ErrInvalidArguments = errors.New("invalid arguments")
	// ErrArgumentTooLarge means the arguments exceed the argument bound.
	ErrArgumentTooLarge = errors.New("arguments too large")
	// ErrResultTooLarge means the result exceeds the result bound.
	ErrResultTooLarge = errors.New("result too large")
	// ErrToolError means the tool result has "isError": true; see *ToolError.
	ErrToolError = errors.New("tool returned an error result")
	// ErrLiveDrift means the live tool list differs from the frozen snapshot; see *DriftError.
	ErrLiveDrift = errors.New("live tool list differs from the frozen snapshot")
	// ErrAuthorizationUnavailable means the authorizer could not decide (e.g. the apiserver did not
	// answer). Invocation fails closed.
	ErrAuthorizationUnavailable = errors.New("authorization unavailable")
	// ErrCallFailed means the remote call failed for a reason other than a refusal of this package;
	// see *CallError.
	ErrCallFailed = errors.New("call failed")
)

// RefusalError is a named refusal of this package. It carries only local names (the operation
// reference, the refusal name), never caller values, tokens, bodies or server prose.
type RefusalError struct {
	// Name is the stable refusal name (one of the Refusal* constants).
	Name string
	// Operation is the operation reference the request named, when there is one.
	Operation string
	// Err is the sentinel reason (ErrStaleLease, ...), possibly wrapping a lower-level cause.
	Err error
}

// Refusal returns the stable refusal name.
func (e *RefusalError) Refusal() string { return e.Name }

// Unwrap returns the reason.
func (e *RefusalError) Unwrap() error { return e.Err }

func (e *RefusalError) Error() string {
	if e.Operation == "" {
		return "invocation: refused: " + e.Name
	}
	return fmt.Sprintf("invocation: %q: refused: %s", clip(e.Operation), e.Name)
}

func refuse(name, op string, err error) *RefusalError {
	return &RefusalError{Name: name, Operation: op, Err: err}
}

// InvalidArgumentsError is the refusal "invalid_arguments". Pointer is the RFC 6901 JSON Pointer
// of the argument that failed (empty: the whole arguments object), Keyword the schema keyword
// path that failed (e.g. "type", "required", "properties/a/minimum"). The failing value is never
// echoed.
type InvalidArgumentsError struct {
	// Operation is the operation reference.
	Operation string
	// Pointer locates the failing argument in the arguments object ("" for the object itself).
	Pointer string
	// Keyword is the schema keyword that failed; empty when the arguments are not JSON at all.
	Keyword string
}

// Refusal returns "invalid_arguments".
func (e *InvalidArgumentsError) Refusal() string { return RefusalInvalidArguments }

// Unwrap returns ErrInvalidArguments.
func (e *InvalidArgumentsError) Unwrap() error { return ErrInvalidArguments }

func (e *InvalidArgumentsError) Error() string {
	msg := fmt.Sprintf("invocation: %q: refused: invalid_arguments", clip(e.Operation))
	if e.Keyword != "" {
		msg += fmt.Sprintf(" (at %q: %s)", clip(e.Pointer), e.Keyword)
	}
	return msg
}

// ToolError is the refusal "tool_error": the tool answered with "isError": true. Result is the
// complete result object exactly as received (lossless); it is server content, so it is never
// part of Error().
type ToolError struct {
	// Operation is the operation reference.
	Operation string
	// Result is the whole tools/call result as received.
	Result []byte
}

// Refusal returns "tool_error".
func (e *ToolError) Refusal() string { return RefusalToolError }

// Unwrap returns ErrToolError.
func (e *ToolError) Unwrap() error { return ErrToolError }

func (e *ToolError) Error() string {
	return fmt.Sprintf("invocation: %q: tool returned isError", clip(e.Operation))
}

// DriftError is the refusal "live_drift": when the surface connected, or re-listed the tools of
// its session (Options.RelistInterval), the live server's snapshot digest was Live, not the
// frozen Frozen. Nothing was called. The operator's re-verification
// records the difference for review; invocation only fails closed.
type DriftError struct {
	// Frozen is the active (reviewed) snapshot digest.
	Frozen string
	// Live is the snapshot digest the server lists now.
	Live string
}

// Refusal returns "live_drift".
func (e *DriftError) Refusal() string { return RefusalLiveDrift }

// Unwrap returns ErrLiveDrift.
func (e *DriftError) Unwrap() error { return ErrLiveDrift }

func (e *DriftError) Error() string {
	return fmt.Sprintf("invocation: refused: live_drift (frozen %s, live %s)", e.Frozen, e.Live)
}

// AuthorizationError reports that the authorizer could not decide. Invocation fails closed.
// Err is the authorizer's error (an apiserver error names no token or body).
type AuthorizationError struct {
	// Operation is the operation reference.
	Operation string
	// Err is the underlying error.
	Err error
}

// Unwrap returns ErrAuthorizationUnavailable and the underlying error.
func (e *AuthorizationError) Unwrap() []error { return []error{ErrAuthorizationUnavailable, e.Err} }

func (e *AuthorizationError) Error() string {
	return fmt.Sprintf("invocation: %q: authorization unavailable", clip(e.Operation))
}

// CallError is a failed remote call that is not one of this package's refusals: a transport
// failure, a JSON-RPC error (only its code is kept by mcpclient), an egress refusal, a refusal of
// mcpclient. Err is that error; errors.As reaches *mcpclient.RefusalError, *egress.DestinationError
// and the like. Like them, it never carries bodies, headers, tokens or server prose.
type CallError struct {
	// Operation is the operation reference.
	Operation string
	// Err is the underlying error.
	Err error
}

// Unwrap returns ErrCallFailed and the underlying error.
func (e *CallError) Unwrap() []error { return []error{ErrCallFailed, e.Err} }

func (e *CallError) Error() string {
	return fmt.Sprintf("invocation: %q: call failed: %v", clip(e.Operation), e.Err)
}

// clip bounds an identifier before it goes into an error message (refusal.Clip at 128 bytes).
func clip(s string) string { return refusal.Clip(s, 128) }
