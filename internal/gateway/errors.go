package gateway

import (
	"errors"
	"time"
)

// Refusal names of the gateway itself; refusals of invocation (forbidden, not_exposed,
// stale_lease, invalid_arguments, live_drift, ...) pass through with their own names.
const (
	// RefusalUnauthenticated: no bearer token, or the TokenReview did not authenticate it for
	// the gateway's audience (HTTP 401 with WWW-Authenticate).
	RefusalUnauthenticated = "unauthenticated"
	// RefusalCallerBusy: the caller already has --max-inflight-per-caller requests running
	// (HTTP 429 with Retry-After).
	RefusalCallerBusy = "caller_busy"
	// RefusalOverloaded: the gateway already runs --max-inflight requests (HTTP 503 with
	// Retry-After).
	RefusalOverloaded = "overloaded"
	// RefusalShuttingDown: the gateway is draining (HTTP 503).
	RefusalShuttingDown = "shutting_down"
	// RefusalHostNotAllowed: the Host header is not one of --allowed-hosts (HTTP 403).
	RefusalHostNotAllowed = "host_not_allowed"
	// RefusalNotFound: the route names no deployment (HTTP 404).
	RefusalNotFound = "not_found"
	// RefusalNotActive: the caller may invoke the deployment but it is not active (not Ready for
	// its current generation, or not verified by this gateway).
	RefusalNotActive = "not_active"
	// RefusalInvalidParams: the arguments of a meta-tool are not what it takes.
	RefusalInvalidParams = "invalid_params"
	// RefusalUnknownTool: tools/call named no tool of the route.
	RefusalUnknownTool = "unknown_tool"
	// RefusalDeadlineExceeded: the call did not finish within --call-timeout.
	RefusalDeadlineExceeded = "deadline_exceeded"
	// RefusalResultNotRepresentable: the upstream result cannot be passed through the MCP
	// server without changing it.
	RefusalResultNotRepresentable = "result_not_representable"
	// RefusalAuthorizationUnavailable: the SubjectAccessReview could not be made (fails closed).
	RefusalAuthorizationUnavailable = "authorization_unavailable"
	// RefusalAuthRateLimited: the request's source (the address the gateway sees) has spent its
	// budget of failed TokenReviews (--auth-failure-burst, refilled at --auth-failure-rate per
	// second); the token was not sent to the apiserver (HTTP 429 with Retry-After).
	RefusalAuthRateLimited = "authentication_rate_limited"
	// RefusalRequestBodyTimeout: the request body did not arrive within --body-read-timeout
	// (HTTP 408); no slot was held while it was awaited.
	RefusalRequestBodyTimeout = "request_body_timeout"
	// RefusalCallFailed: the upstream call failed for another reason (nothing of it is shown).
	RefusalCallFailed = "call_failed"
)

var (
	// ErrUnauthenticated is the reason of RefusalUnauthenticated.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrAudience means the TokenReview authenticated the token for other audiences only.
	ErrAudience = errors.New("token not issued for the gateway's audience")
	// ErrTokenReviewUnavailable means the TokenReview could not be made.
	ErrTokenReviewUnavailable = errors.New("token review unavailable")
	// ErrAuthRateLimited is the reason of RefusalAuthRateLimited.
	ErrAuthRateLimited = errors.New("too many failed authentications from this source")
)

// AuthError is an authentication failure: Err is ErrUnauthenticated, ErrAudience,
// ErrAuthRateLimited or ErrTokenReviewUnavailable (wrapped). It never carries the token.
type AuthError struct {
	// Err is the reason.
	Err error
	// RetryAfter is, for ErrAuthRateLimited, how long until the source may try again.
	RetryAfter time.Duration
}

// Refusal returns "authentication_rate_limited" for ErrAuthRateLimited, "unauthenticated"
// otherwise.
func (e *AuthError) Refusal() string {
	if errors.Is(e.Err, ErrAuthRateLimited) {
		return RefusalAuthRateLimited
	}
	return RefusalUnauthenticated
}

// Unwrap returns the reason.
func (e *AuthError) Unwrap() error { return e.Err }

func (e *AuthError) Error() string {
	return "gateway: refused: " + e.Refusal() + ": " + e.Err.Error()
}
