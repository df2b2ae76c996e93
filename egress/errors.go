package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"github.com/b10x/connector-mcp/refusal"
)

// Stable refusal names returned by the Refusal methods of this package's errors.
const (
	RefusalDestination      = "destination_refused"
	RefusalScheme           = "scheme_refused"
	RefusalRequestTooLarge  = "request_too_large"
	RefusalResponseTooLarge = "response_too_large"
	RefusalHeaderTooLarge   = "header_too_large"
	RefusalRedirect         = "redirect_refused"
	RefusalDeadline         = "deadline_exceeded"
	// RefusalTLSUnknownAuthority: the server's certificate chain does not lead to a trusted
	// root (a private CA whose bundle was not configured, or an impostor).
	RefusalTLSUnknownAuthority = "tls_unknown_authority"
	// RefusalTLSHostnameMismatch: the certificate is not valid for the endpoint's host.
	RefusalTLSHostnameMismatch = "tls_hostname_mismatch"
	// RefusalTLSCertificateInvalid: the certificate is expired, not yet valid, or otherwise
	// unusable.
	RefusalTLSCertificateInvalid = "tls_certificate_invalid"
)

var (
	// ErrDestinationRefused matches every [DestinationError]: the destination host, port or
	// resolved address is not allowed by the policy.
	ErrDestinationRefused = errors.New("egress: destination refused")
	// ErrSchemeRefused matches every [SchemeError]: the URL scheme is not allowed.
	ErrSchemeRefused = errors.New("egress: scheme refused")
	// ErrRequestTooLarge matches a [TooLargeError] for a request body over the bound.
	ErrRequestTooLarge = errors.New("egress: request too large")
	// ErrResponseTooLarge matches a [TooLargeError] for a (decompressed) response body over
	// the bound.
	ErrResponseTooLarge = errors.New("egress: response too large")
	// ErrHeaderTooLarge matches a [TooLargeError] for request or response headers over the
	// bound.
	ErrHeaderTooLarge = errors.New("egress: header too large")
	// ErrRedirectRefused matches every [RedirectError].
	ErrRedirectRefused = errors.New("egress: redirect refused")
	// ErrDeadlineExceeded matches every [DeadlineError]. A DeadlineError also matches
	// context.DeadlineExceeded.
	ErrDeadlineExceeded = errors.New("egress: deadline exceeded")
	// ErrCredentialUnavailable matches a [CredentialError]: the referenced secret or key does
	// not exist, is empty or cannot be read.
	ErrCredentialUnavailable = errors.New("egress: credential unavailable")
	// ErrUnrequestedEncoding is returned (in an [*ExchangeError]) when a response to an
	// exchange carries a content encoding the port did not ask for (it asks for gzip only and
	// decodes it before the bound applies).
	ErrUnrequestedEncoding = errors.New("egress: response in an unrequested content encoding")
	// ErrTLSRefused matches every [TLSError]: the server's certificate failed verification.
	ErrTLSRefused = errors.New("egress: TLS verification failed")
	// ErrInvalidPolicy is returned (wrapped) by constructors given an unusable policy.
	ErrInvalidPolicy = errors.New("egress: invalid policy")
)

// DestinationError is the refusal destination_refused: the host, port or the address the
// connection was about to be made to is not allowed. Reason is one of the stable words
// "unspecified", "loopback", "link_local", "multicast", "reserved", "metadata", "apiserver",
// "private", "port", "binding", "invalid", "resolve" or "policy_unavailable" (the dynamic deny
// list of [Policy.Deny] could not be read). "apiserver" covers every always-denied cluster
// prefix: the apiserver's addresses, the Service CIDRs and the gateway's own Service.
type DestinationError struct {
	// Addr is the judged address ("ip:port" at dial time, "host:port" for a binding mismatch).
	// It never contains userinfo, paths or query strings.
	Addr string
	// Reason is the stable word naming the rule that refused the destination.
	Reason string
}

func (e *DestinationError) Error() string {
	return fmt.Sprintf("egress: destination refused: %s (%s)", e.Addr, e.Reason)
}

// Refusal returns "destination_refused".
func (e *DestinationError) Refusal() string { return RefusalDestination }

// Unwrap returns [ErrDestinationRefused].
func (e *DestinationError) Unwrap() error { return ErrDestinationRefused }

// SchemeError is the refusal scheme_refused: the URL scheme is not https, or plain http was
// used where it is not allowed (plain http reaches loopback only, and only when loopback is
// explicitly allowed).
type SchemeError struct {
	// Scheme is the refused scheme.
	Scheme string
	// Reason is a fixed explanation.
	Reason string
}

func (e *SchemeError) Error() string {
	return fmt.Sprintf("egress: scheme refused: %q (%s)", e.Scheme, e.Reason)
}

// Refusal returns "scheme_refused".
func (e *SchemeError) Refusal() string { return RefusalScheme }

// Unwrap returns [ErrSchemeRefused].
func (e *SchemeError) Unwrap() error { return ErrSchemeRefused }

// Kinds of [TooLargeError].
const (
	LimitRequest  = "request"
	LimitResponse = "response"
	LimitHeader   = "header"
)

// TooLargeError is the refusal request_too_large, response_too_large or header_too_large: a
// byte bound of the policy was reached. Nothing past the bound is kept and a response is never
// truncated into something that could pass for complete.
type TooLargeError struct {
	// Kind is [LimitRequest], [LimitResponse] or [LimitHeader].
	Kind string
	// Limit is the bound in bytes.
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("egress: %s exceeds %d bytes", e.Kind, e.Limit)
}

// Refusal returns "<kind>_too_large".
func (e *TooLargeError) Refusal() string {
	switch e.Kind {
	case LimitRequest:
		return RefusalRequestTooLarge
	case LimitHeader:
		return RefusalHeaderTooLarge
	default:
		return RefusalResponseTooLarge
	}
}

// Unwrap returns the sentinel of the kind: [ErrRequestTooLarge], [ErrResponseTooLarge] or
// [ErrHeaderTooLarge].
func (e *TooLargeError) Unwrap() error {
	switch e.Kind {
	case LimitRequest:
		return ErrRequestTooLarge
	case LimitResponse:
		return ErrResponseTooLarge
	default:
		return ErrHeaderTooLarge
	}
}

// RedirectError is the refusal redirect_refused: redirects are off, the cap was reached, the
// redirect downgrades https to http, or it leaves the bound endpoint.
type RedirectError struct {
	// Reason is a fixed explanation ("redirects disabled", "too many redirects", ...).
	Reason string
}

func (e *RedirectError) Error() string { return "egress: redirect refused: " + e.Reason }

// Refusal returns "redirect_refused".
func (e *RedirectError) Refusal() string { return RefusalRedirect }

// Unwrap returns [ErrRedirectRefused].
func (e *RedirectError) Unwrap() error { return ErrRedirectRefused }

// DeadlineError is the refusal deadline_exceeded: the exchange (connect, request, response
// headers and body) did not complete within its deadline.
type DeadlineError struct {
	// Timeout is the per-exchange deadline of the policy (0 when the caller's own context
	// deadline expired first).
	Timeout time.Duration
}

func (e *DeadlineError) Error() string {
	if e.Timeout > 0 {
		return fmt.Sprintf("egress: exchange deadline of %s exceeded", e.Timeout)
	}
	return "egress: exchange deadline exceeded"
}

// Refusal returns "deadline_exceeded".
func (e *DeadlineError) Refusal() string { return RefusalDeadline }

// Unwrap returns [ErrDeadlineExceeded] and context.DeadlineExceeded.
func (e *DeadlineError) Unwrap() []error {
	return []error{ErrDeadlineExceeded, context.DeadlineExceeded}
}

// CredentialError reports that the bearer named by a [CredentialRef] could not be obtained.
// It names the reference (which is not secret), never the value.
type CredentialError struct {
	// Ref is the reference that could not be resolved.
	Ref CredentialRef
	// Reason is a fixed explanation ("secret not found", "key not found", "empty", ...).
	Reason string
	// Err is the underlying error, if any (e.g. a Kubernetes API error); it never contains
	// the secret value.
	Err error
}

func (e *CredentialError) Error() string {
	s := fmt.Sprintf("egress: credential %s/%s unavailable: %s", e.Ref.Name, e.Ref.Key, e.Reason)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns [ErrCredentialUnavailable] and the underlying error.
func (e *CredentialError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrCredentialUnavailable}
	}
	return []error{ErrCredentialUnavailable, e.Err}
}

// TLSError is the refusal tls_unknown_authority, tls_hostname_mismatch or
// tls_certificate_invalid: the server's certificate failed verification against the configured
// roots. Verification is never skipped; a private CA is configured, not waived. The text is
// fixed: it carries no certificate names or other server-chosen strings.
type TLSError struct {
	// Refusal name: one of [RefusalTLSUnknownAuthority], [RefusalTLSHostnameMismatch] or
	// [RefusalTLSCertificateInvalid].
	Name string
}

func (e *TLSError) Error() string {
	switch e.Name {
	case RefusalTLSUnknownAuthority:
		return "egress: TLS verification failed: certificate signed by an unknown authority (" + e.Name + ")"
	case RefusalTLSHostnameMismatch:
		return "egress: TLS verification failed: certificate not valid for the endpoint host (" + e.Name + ")"
	}
	return "egress: TLS verification failed: certificate invalid (" + e.Name + ")"
}

// Refusal returns the stable name.
func (e *TLSError) Refusal() string { return e.Name }

// Unwrap returns [ErrTLSRefused].
func (e *TLSError) Unwrap() error { return ErrTLSRefused }

// tlsRefusal returns the [*TLSError] err records, or nil when err is no certificate
// verification failure.
func tlsRefusal(err error) *TLSError {
	var (
		ua x509.UnknownAuthorityError
		hn x509.HostnameError
		ci x509.CertificateInvalidError
		cv *tls.CertificateVerificationError
	)
	switch {
	case errors.As(err, &ua):
		return &TLSError{Name: RefusalTLSUnknownAuthority}
	case errors.As(err, &hn):
		return &TLSError{Name: RefusalTLSHostnameMismatch}
	case errors.As(err, &ci), errors.As(err, &cv):
		return &TLSError{Name: RefusalTLSCertificateInvalid}
	}
	return nil
}

// Every refusal of this package has the shared shape of the refusal package.
var (
	_ refusal.Named = (*DestinationError)(nil)
	_ refusal.Named = (*SchemeError)(nil)
	_ refusal.Named = (*TooLargeError)(nil)
	_ refusal.Named = (*RedirectError)(nil)
	_ refusal.Named = (*DeadlineError)(nil)
	_ refusal.Named = (*TLSError)(nil)
)
