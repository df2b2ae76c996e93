package egress

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// Defaults applied to zero fields of a [Policy].
const (
	DefaultMaxRequestBytes  int64 = 4 << 20
	DefaultMaxResponseBytes int64 = 16 << 20
	DefaultMaxHeaderBytes   int64 = 64 << 10
	DefaultTimeout                = 30 * time.Second
	// MaxRedirectsCap is the largest accepted [Policy.MaxRedirects].
	MaxRedirectsCap = 10
)

// Policy is the complete outbound policy of one exchange port, derived from a reviewed
// endpoint binding. Zero byte bounds and a zero Timeout take the Default values; MaxRedirects
// 0 refuses every redirect.
type Policy struct {
	// Endpoint is the reviewed endpoint URL. Its scheme, host and port are bound exactly: a
	// request to any other scheme, host or port is refused (the path is not bound). Empty means
	// no host binding, only the IP policy applies — for the OCI registry client (redirects to
	// blob storage) and OAuth discovery; a Credential requires an Endpoint.
	Endpoint string
	// IP is the dial-time address policy.
	IP IPPolicy
	// Resolver resolves host names; nil means the system resolver.
	Resolver Resolver
	// TLSClientConfig is cloned for every connection; nil means system roots. TLS 1.2 is the
	// minimum whatever it says, and InsecureSkipVerify is refused.
	TLSClientConfig *tls.Config
	// MaxRequestBytes bounds the request body.
	MaxRequestBytes int64
	// MaxResponseBytes bounds the response body after decompression.
	MaxResponseBytes int64
	// MaxHeaderBytes bounds the request headers and the response headers, each.
	MaxHeaderBytes int64
	// Timeout is the per-exchange deadline: connect, request, response headers and body.
	Timeout time.Duration
	// MaxRedirects caps followed redirects (0: none, at most [MaxRedirectsCap]). Each hop is
	// re-checked: scheme, binding, dial-time IP policy; https never goes to http and
	// Authorization never crosses hosts.
	MaxRedirects int
	// Credential optionally names the bearer sent with every exchange; it is fetched from
	// Secrets for each exchange and replaces any Authorization header of the request.
	Credential *CredentialRef
	// Secrets resolves Credential.
	Secrets SecretStore
	// Deny, when set, is the dynamic deny list (the cluster's apiserver, Service CIDRs, the
	// gateway's own Service, see internal/k8sbinding): it is read for every dial and its prefixes
	// are refused like IP.DenyPrefixes (reason "apiserver"). A read error refuses the dial
	// (reason "policy_unavailable"): nothing is dialed without the deny list.
	Deny DenySource
}

// DenySource returns prefixes that are always refused, read at dial time (see [Policy.Deny]).
type DenySource interface {
	// Deny returns the prefixes to refuse; an error means they could not be read (the dial
	// is refused).
	Deny(ctx context.Context) ([]netip.Prefix, error)
}

// DenyFunc adapts a function to [DenySource].
type DenyFunc func(ctx context.Context) ([]netip.Prefix, error)

// Deny calls f.
func (f DenyFunc) Deny(ctx context.Context) ([]netip.Prefix, error) { return f(ctx) }

// binding is the exact scheme, host and port an endpoint is bound to.
type binding struct {
	scheme, host, port string
}

func (b binding) String() string { return net.JoinHostPort(b.host, b.port) }

// bindingOf returns the normalised scheme, host and port of u.
func bindingOf(u *url.URL) binding {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	return binding{scheme: scheme, host: strings.ToLower(strings.TrimSuffix(u.Hostname(), ".")), port: port}
}

// withDefaults returns p with defaults applied, or an error wrapping [ErrInvalidPolicy].
func (p Policy) withDefaults() (Policy, error) {
	if err := p.IP.Validate(); err != nil {
		return p, err
	}
	if p.MaxRequestBytes < 0 || p.MaxResponseBytes < 0 || p.MaxHeaderBytes < 0 || p.Timeout < 0 {
		return p, fmt.Errorf("%w: negative bound", ErrInvalidPolicy)
	}
	if p.TLSClientConfig != nil && p.TLSClientConfig.InsecureSkipVerify {
		return p, fmt.Errorf("%w: TLS verification cannot be turned off; add the CA to RootCAs", ErrInvalidPolicy)
	}
	if p.MaxRedirects < 0 || p.MaxRedirects > MaxRedirectsCap {
		return p, fmt.Errorf("%w: MaxRedirects must be within 0..%d", ErrInvalidPolicy, MaxRedirectsCap)
	}
	if p.MaxRequestBytes == 0 {
		p.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if p.MaxResponseBytes == 0 {
		p.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if p.MaxHeaderBytes == 0 {
		p.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if p.Timeout == 0 {
		p.Timeout = DefaultTimeout
	}
	if p.Credential != nil {
		if p.Endpoint == "" {
			return p, fmt.Errorf("%w: a credential requires an endpoint binding", ErrInvalidPolicy)
		}
		if p.Secrets == nil {
			return p, fmt.Errorf("%w: a credential requires a secret store", ErrInvalidPolicy)
		}
		if err := p.Credential.Validate(); err != nil {
			return p, fmt.Errorf("%w: %w", ErrInvalidPolicy, err)
		}
	}
	return p, nil
}

// endpointBinding parses and checks p.Endpoint; nil when there is no binding.
func (p Policy) endpointBinding() (*binding, error) {
	if p.Endpoint == "" {
		return nil, nil
	}
	u, err := url.Parse(p.Endpoint)
	if err != nil || !u.IsAbs() {
		return nil, fmt.Errorf("%w: endpoint is not an absolute URL", ErrInvalidPolicy)
	}
	if err := p.checkScheme(u.Scheme); err != nil {
		return nil, err
	}
	if u.Host == "" || u.Opaque != "" {
		return nil, fmt.Errorf("%w: endpoint has no host", ErrInvalidPolicy)
	}
	if u.User != nil {
		return nil, fmt.Errorf("%w: endpoint carries userinfo", ErrInvalidPolicy)
	}
	b := bindingOf(u)
	if b.host == "" {
		return nil, fmt.Errorf("%w: endpoint has no host", ErrInvalidPolicy)
	}
	return &b, nil
}

// checkScheme accepts https, and http only when loopback is explicitly allowed (the dialer
// then insists on a loopback peer).
func (p Policy) checkScheme(scheme string) error {
	switch strings.ToLower(scheme) {
	case "https":
		return nil
	case "http":
		if p.IP.Loopback != LoopbackDenied {
			return nil
		}
		return &SchemeError{Scheme: "http", Reason: "plain http needs loopback explicitly allowed"}
	default:
		return &SchemeError{Scheme: scheme, Reason: "only https is allowed"}
	}
}
