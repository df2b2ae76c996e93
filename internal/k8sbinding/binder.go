package k8sbinding

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/b10x/connector-mcp/egress"
)

// ErrClusterPolicyUnavailable is returned (wrapped) when the namespace's ceiling or the
// cluster's deny list cannot be read: nothing is dialed then (fail closed).
var ErrClusterPolicyUnavailable = errors.New("k8sbinding: cluster egress policy unavailable")

// Request is one endpoint binding of a consumer (a ServiceDeployment's mcp_connection).
type Request struct {
	// Namespace is the consumer's namespace: its credential Secret lives there and its ceiling
	// applies.
	Namespace string
	// URL is the endpoint.
	URL string
	// AllowCIDRs are the binding's private ranges; each must lie within the namespace's ceiling.
	AllowCIDRs []string
	// Credential optionally names the bearer.
	Credential *egress.CredentialRef
	// CABundle optionally names the connection's own CA bundle (a ConfigMap key in Namespace):
	// the endpoint's certificate is then verified against it only.
	CABundle *CABundleRef
}

// Binder builds the egress port of an endpoint binding under the cluster's rules. The manager's
// freeze and the invocation connector both use it.
type Binder struct {
	// Base is the cluster's exchange policy (IP policy, bounds, deadline, TLS roots); its
	// Endpoint, Credential and Secrets are replaced per binding.
	Base egress.Policy
	// Secrets reads credential Secrets (see [SecretStore]); required when a binding names a
	// credential.
	Secrets client.Reader
	// Ceilings gives each namespace's ceiling. Nil means an empty ceiling: only the ranges of
	// Base.IP.AllowCIDRs may be requested.
	Ceilings CeilingSource
	// Deny gives the cluster addresses that are always denied: read when the port is built
	// (added to Base.IP.DenyPrefixes, so an IP-literal URL is refused before any dial) and
	// again at every dial (Base.Deny). Optional for tests; the binaries always set it.
	Deny DenySource
	// ConfigMaps reads CA bundle ConfigMaps (see [LoadCABundle]); required when a binding names
	// a CA bundle. The manager passes its cache, which holds only labelled ConfigMaps.
	ConfigMaps client.Reader
}

// Check applies the cluster's rules to req without building a port or reading the credential:
// the ceiling, the deny list, the CA bundle and, for an IP-literal host, the address. Refusals: a
// [*CeilingError]; a [*CABundleError]; a [*egress.DestinationError] when the URL's host is an IP literal the policy
// refuses (judged here, before any dial); ErrClusterPolicyUnavailable when the cluster state
// cannot be read; egress.ErrInvalidPolicy for an unparseable allowCIDRs entry.
func (b *Binder) Check(ctx context.Context, req Request) error {
	_, _, err := b.prepare(ctx, req)
	return err
}

// Transport builds the egress port of req with egress.NewBindingTransport, after [Binder.Check]'s
// rules; the credential, when named, is read per exchange through a [SecretStore].
func (b *Binder) Transport(ctx context.Context, req Request) (*egress.Transport, error) {
	base, binding, err := b.prepare(ctx, req)
	if err != nil {
		return nil, err
	}
	return egress.NewBindingTransport(base, binding)
}

// prepare returns the base policy (with the cluster deny list) and the binding of req, after
// the ceiling and literal-address checks.
func (b *Binder) prepare(ctx context.Context, req Request) (egress.Policy, egress.Binding, error) {
	base := b.Base
	binding := egress.Binding{URL: req.URL, AllowCIDRs: req.AllowCIDRs}
	ceiling := slices.Clone(b.Base.IP.AllowCIDRs)
	if b.Ceilings != nil && len(req.AllowCIDRs) > 0 {
		c, err := b.Ceilings.Ceiling(ctx, req.Namespace)
		if err != nil {
			return base, binding, fmt.Errorf("%w: %w", ErrClusterPolicyUnavailable, err)
		}
		ceiling = append(ceiling, c...)
	}
	if err := CheckCeiling(req.AllowCIDRs, ceiling); err != nil {
		return base, binding, err
	}
	if b.Deny != nil {
		deny, err := b.Deny.Deny(ctx)
		if err != nil {
			return base, binding, fmt.Errorf("%w: %w", ErrClusterPolicyUnavailable, err)
		}
		base.IP.DenyPrefixes = append(slices.Clone(base.IP.DenyPrefixes), deny...)
		// And again at every dial of the port, which may outlive the read (a pooled session).
		if base, err = withDeny(base, b.Deny); err != nil {
			return base, binding, err
		}
	}
	widened := base.IP
	if len(req.AllowCIDRs) > 0 {
		extra, err := egress.ParseCIDRs(req.AllowCIDRs)
		if err != nil {
			return base, binding, err
		}
		widened.AllowCIDRs = append(slices.Clone(widened.AllowCIDRs), extra...)
	}
	if err := literalCheck(widened, req.URL); err != nil {
		return base, binding, err
	}
	if req.Credential != nil {
		if b.Secrets == nil {
			return base, binding, fmt.Errorf("%w: a credential is named but no Secret reader is given", egress.ErrInvalidPolicy)
		}
		ref := *req.Credential
		binding.Credential, binding.Secrets = &ref, NewSecretStore(b.Secrets, req.Namespace, req.URL)
	}
	if req.CABundle != nil {
		if b.ConfigMaps == nil {
			return base, binding, fmt.Errorf("%w: a CA bundle is named but no ConfigMap reader is given", egress.ErrInvalidPolicy)
		}
		pool, err := LoadCABundle(ctx, b.ConfigMaps, req.Namespace, *req.CABundle)
		if err != nil {
			return base, binding, err
		}
		binding.RootCAs = pool
	}
	return base, binding, nil
}

// Credential reads the binding's credential under the same rule the port applies per exchange
// (for a fingerprint); nil when the binding names none.
func (b *Binder) Credential(ctx context.Context, req Request) ([]byte, error) {
	if req.Credential == nil {
		return nil, nil
	}
	if b.Secrets == nil {
		return nil, fmt.Errorf("%w: a credential is named but no Secret reader is given", egress.ErrInvalidPolicy)
	}
	return NewSecretStore(b.Secrets, req.Namespace, req.URL).Get(ctx, *req.Credential)
}

// literalCheck judges a URL whose host is an IP literal before anything is dialed.
func literalCheck(ip egress.IPPolicy, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return nil // egress refuses it by name when the port is built
	}
	httpOK := strings.EqualFold(u.Scheme, "http") && ip.Loopback != egress.LoopbackDenied
	if !strings.EqualFold(u.Scheme, "https") && !httpOK {
		return nil // egress refuses the scheme by name when the port is built
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(u.Hostname(), "."))
	if err != nil {
		return nil
	}
	port, _ := strconv.ParseUint(u.Port(), 10, 16)
	if port == 0 {
		port = 443
		if strings.EqualFold(u.Scheme, "http") {
			port = 80
		}
	}
	return ip.Check(netip.AddrPortFrom(a, uint16(port)))
}
