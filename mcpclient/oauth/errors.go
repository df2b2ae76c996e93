package oauth

import (
	"errors"
	"net/url"
	"slices"

	"github.com/b10x/connector-mcp/refusal"
)

// Sentinel errors of package oauth, matched with [errors.Is]. None of the errors of this package
// carries a token, an authorization code, a client secret or the authorization server's prose.
var (
	// ErrNotFound reports that the store holds no credential (or registration) for the key.
	ErrNotFound = errors.New("oauth: not found")
	// ErrUnsafeStore reports a credential file or directory that may not be trusted: readable or
	// writable by group or others, owned by another user, not a regular file, or corrupt.
	ErrUnsafeStore = errors.New("oauth: credential store refused")
	// ErrLoginRequired reports that a new authorization is needed but the handler may not start
	// one (no interactive fetcher): run "mcpctl login".
	ErrLoginRequired = errors.New("oauth: login required")
	// ErrAuthorizationFailed reports that the authorization flow did not produce a token.
	ErrAuthorizationFailed = errors.New("oauth: authorization failed")
	// ErrBindingMismatch reports that a token would have been obtained from, or presented to, a
	// party other than the (resource, issuer) pair it is bound to.
	ErrBindingMismatch = errors.New("oauth: credential binding mismatch")
	// ErrRefreshFailed reports a failed token refresh; the stored credential is left untouched.
	ErrRefreshFailed = errors.New("oauth: token refresh failed")
	// ErrInvalidServerURL reports an MCP server URL that cannot key a credential: not http(s),
	// no host, or carrying user information.
	ErrInvalidServerURL = errors.New("oauth: the MCP server URL must be an http(s) URL with a host and no user information")
	// ErrHTTPClientRequired reports a [Handler] (or producer call) given no *http.Client: the
	// package owns no socket and is always handed the caller's guarded client.
	ErrHTTPClientRequired = errors.New("oauth: an *http.Client is required (build it from the egress port)")
	// ErrAuthorizationTimeout reports that the user did not complete the authorization in time.
	ErrAuthorizationTimeout = errors.New("oauth: authorization not completed before the deadline")
)

// Refusal names (stable, snake_case), returned by the Refusal methods of this package's errors.
const (
	RefusalLoginRequired       = "login_required"
	RefusalBindingMismatch     = "oauth_binding_mismatch"
	RefusalStoreInsecure       = "credential_store_insecure"
	RefusalStoreForeignOwner   = "credential_store_foreign_owner"
	RefusalStoreCorrupt        = "credential_store_corrupt"
	RefusalStoreNotRegular     = "credential_store_not_regular"
	RefusalAuthorizationDenied = "authorization_denied"
)

// StoreError is a refusal to use a credential file or directory. Path names the file; the
// file's content is never included.
type StoreError struct {
	// Path is the refused file or directory.
	Path string
	// Name is the refusal name: one of the RefusalStore* constants.
	Name string
}

// Error describes the failure for logs and CLI output.
func (e *StoreError) Error() string {
	switch e.Name {
	case RefusalStoreInsecure:
		return "oauth: credential store: " + e.Path + " is accessible by group or others (want 0600 files, 0700 directories)"
	case RefusalStoreForeignOwner:
		return "oauth: credential store: " + e.Path + " is owned by another user"
	case RefusalStoreCorrupt:
		return "oauth: credential store: " + e.Path + " is corrupt (not a credential record)"
	default:
		return "oauth: credential store: " + e.Path + " is not a regular file or directory"
	}
}

// Refusal returns the stable refusal name.
func (e *StoreError) Refusal() string { return e.Name }

// Unwrap returns [ErrUnsafeStore].
func (e *StoreError) Unwrap() error { return ErrUnsafeStore }

// LoginRequiredError reports that the credential for Resource must be (re-)authorized
// interactively.
type LoginRequiredError struct {
	// Resource is the MCP server URL.
	Resource string
	// Scopes are the additional scopes a step-up asked for (plain scope tokens only), if any.
	Scopes []string
}

// Error describes the failure for logs and CLI output.
func (e *LoginRequiredError) Error() string {
	u := redactURL(e.Resource)
	hint := "mcpctl login --url " + u
	for _, s := range e.Scopes {
		hint += " --scope " + s
	}
	return "oauth: authorization required for " + u + " (run: " + hint + ")"
}

// Refusal returns "login_required".
func (e *LoginRequiredError) Refusal() string { return RefusalLoginRequired }

// Unwrap returns [ErrLoginRequired].
func (e *LoginRequiredError) Unwrap() error { return ErrLoginRequired }

// BindingError reports a (resource, issuer) binding violation: What names the mismatching part
// ("resource", "issuer", "token_endpoint", "authorization_endpoint").
type BindingError struct {
	// What names the mismatching element.
	What string
}

// Error describes the failure for logs and CLI output.
func (e *BindingError) Error() string {
	return "oauth: credential binding mismatch: " + e.What + " differs from the discovered one"
}

// Refusal returns "oauth_binding_mismatch".
func (e *BindingError) Refusal() string { return RefusalBindingMismatch }

// Unwrap returns [ErrBindingMismatch].
func (e *BindingError) Unwrap() error { return ErrBindingMismatch }

// AuthorizationError reports a failed authorization. Stage is where it failed ("discovery",
// "registration", "authorization", "token", "issuer_check", "state"); Code is the RFC 6749 error
// code when the server sent a registered one, never the server's description.
type AuthorizationError struct {
	// Stage is the step of the flow that failed.
	Stage string
	// Code is a registered OAuth error code ("invalid_grant", "access_denied", ...) or "".
	Code string
	// err is a secret- and prose-free cause (e.g. an egress refusal), or nil.
	err error
}

// Error describes the failure for logs and CLI output.
func (e *AuthorizationError) Error() string {
	s := "oauth: authorization failed at " + e.Stage
	if e.Code != "" {
		s += ": " + e.Code
	}
	if e.err != nil {
		s += ": " + e.err.Error()
	}
	return s
}

// Unwrap returns [ErrAuthorizationFailed] and the sanitized cause, if any.
func (e *AuthorizationError) Unwrap() []error {
	if e.err != nil {
		return []error{ErrAuthorizationFailed, e.err}
	}
	return []error{ErrAuthorizationFailed}
}

// DeniedError reports that the user or the authorization server denied the authorization
// (error=access_denied in the authorization response).
type DeniedError struct{}

// Error describes the failure for logs and CLI output.
func (e *DeniedError) Error() string { return "oauth: authorization denied" }

// Refusal returns "authorization_denied".
func (e *DeniedError) Refusal() string { return RefusalAuthorizationDenied }

// Unwrap returns [ErrAuthorizationFailed].
func (e *DeniedError) Unwrap() error { return ErrAuthorizationFailed }

// RefreshError reports a failed refresh; Code is a registered OAuth error code or "".
type RefreshError struct {
	// Code is a registered OAuth error code or "".
	Code string
}

// Error describes the failure for logs and CLI output.
func (e *RefreshError) Error() string {
	if e.Code == "" {
		return "oauth: token refresh failed"
	}
	return "oauth: token refresh failed: " + e.Code
}

// Unwrap returns [ErrRefreshFailed].
func (e *RefreshError) Unwrap() error { return ErrRefreshFailed }

// registeredCodes are the OAuth error codes (RFC 6749 §4.1.2.1, §5.2, RFC 6750, RFC 7591, RFC
// 8707) that may be repeated in an error; anything else a server sends is dropped.
var registeredCodes = []string{
	"invalid_request", "unauthorized_client", "access_denied", "unsupported_response_type",
	"invalid_scope", "server_error", "temporarily_unavailable", "invalid_client", "invalid_grant",
	"unsupported_grant_type", "invalid_token", "insufficient_scope", "invalid_target",
	"invalid_redirect_uri", "invalid_client_metadata", "login_required", "consent_required",
	"interaction_required",
}

// redactURL drops the query and fragment of a URL shown in a message (they may carry secrets).
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}

// sanitizeCode returns code when it is a registered OAuth error code, else "".
func sanitizeCode(code string) string {
	if slices.Contains(registeredCodes, code) {
		return code
	}
	return ""
}

// Every refusal of this package has the shared shape of the refusal package.
var (
	_ refusal.Named = (*StoreError)(nil)
	_ refusal.Named = (*LoginRequiredError)(nil)
	_ refusal.Named = (*BindingError)(nil)
	_ refusal.Named = (*DeniedError)(nil)
)
