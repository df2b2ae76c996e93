// Package netcause names the class of a failed network exchange — the name did not resolve, the
// connection was refused or reset, the exchange timed out, the TLS handshake failed — so that an
// error message can say why an exchange failed without repeating the underlying error's text,
// which carries addresses, URLs (with their query) and resolver details.
package netcause

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"syscall"
)

// The classes Of returns.
const (
	// DNS: the host name did not resolve.
	DNS = "dns"
	// Refused: nothing listens at the address (connection refused).
	Refused = "connection_refused"
	// Reset: the peer reset or closed the connection mid-exchange.
	Reset = "connection_reset"
	// Timeout: a deadline passed (dial, TLS handshake, response).
	Timeout = "timeout"
	// TLS: the TLS handshake or the certificate verification failed.
	TLS = "tls"
	// Unreachable: no route to the host or network.
	Unreachable = "unreachable"
)

// Of returns the class of err's network failure, or "" when err is none of them.
func Of(err error) string {
	if err == nil {
		return ""
	}
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var record tls.RecordHeaderError
	var alert tls.AlertError
	var netErr net.Error
	switch {
	case errors.As(err, &dnsErr):
		if dnsErr.IsTimeout {
			return Timeout
		}
		return DNS
	case errors.As(err, &certErr), errors.As(err, &unknownAuthority), errors.As(err, &hostname), errors.As(err, &invalid),
		errors.As(err, &record), errors.As(err, &alert):
		return TLS
	case errors.Is(err, syscall.ECONNREFUSED):
		return Refused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNABORTED):
		return Reset
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return Unreachable
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &netErr) && netErr.Timeout():
		return Timeout
	}
	return ""
}
