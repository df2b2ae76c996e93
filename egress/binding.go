package egress

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"slices"
)

// Binding is a reviewed endpoint binding (a ServiceDeployment's mcp_connection): the one
// endpoint an exchange port may reach, the private ranges it may resolve into, and the optional
// bearer credential read per exchange.
type Binding struct {
	// URL is the endpoint the port is bound to (scheme, host and port must match exactly).
	URL string
	// AllowCIDRs are the binding's private ranges (CIDRs or single addresses), added to the base
	// policy's allow-list. They never open the always-refused classes (loopback, link-local,
	// metadata, unspecified, the apiserver).
	AllowCIDRs []string
	// Credential optionally addresses the bearer token.
	Credential *CredentialRef
	// Secrets reads Credential per exchange; required when Credential is set.
	Secrets SecretStore
	// RootCAs, when set, is the binding's own CA bundle (a private CA): the endpoint's
	// certificate is verified against these roots only, in place of the base policy's roots.
	// Verification itself is never turned off.
	RootCAs *x509.CertPool
}

// NewBindingTransport returns an exchange port bound to b under base: base's address policy
// widened by b.AllowCIDRs, base's bounds, deadline, redirect cap and TLS roots (b.RootCAs, when set, replaces the roots), and b's bearer
// fetched per exchange. base.Endpoint, base.Credential and base.Secrets are replaced by b's.
// An unparseable allow-list entry or a credential without a store is ErrInvalidPolicy.
func NewBindingTransport(base Policy, b Binding) (*Transport, error) {
	p := base
	p.Endpoint = b.URL
	p.Credential, p.Secrets = nil, nil
	if len(b.AllowCIDRs) > 0 {
		extra, err := ParseCIDRs(b.AllowCIDRs)
		if err != nil {
			return nil, err
		}
		p.IP.AllowCIDRs = append(slices.Clone(base.IP.AllowCIDRs), extra...)
	}
	if b.Credential != nil {
		if b.Secrets == nil {
			return nil, fmt.Errorf("%w: a credential is named but no secret store is given", ErrInvalidPolicy)
		}
		ref := *b.Credential
		p.Credential, p.Secrets = &ref, b.Secrets
	}
	if b.RootCAs != nil {
		var cfg *tls.Config
		if base.TLSClientConfig != nil {
			cfg = base.TLSClientConfig.Clone()
		} else {
			cfg = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		cfg.RootCAs = b.RootCAs
		p.TLSClientConfig = cfg
	}
	return NewTransport(p)
}
