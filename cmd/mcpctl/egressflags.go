package main

import (
	"net/http"
	"net/netip"
	"net/url"

	"github.com/spf13/pflag"

	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/ociregistry"
)

// Registry exchanges follow redirects to blob storage; each hop is re-checked at dial time.
const registryMaxRedirects = 5

// egressFlags selects the outbound HTTP policy for verbs that reach a server or registry.
// The default mode uses the callers' defaults (mcpclient, ocipack); "hosted" applies the
// operator's egress policy (docs/egress.md) so it can be tried from the command line.
type egressFlags struct {
	mode          string
	allowCIDRs    []string
	allowLoopback bool
}

// register adds --egress, --allow-cidr and --allow-loopback to fs.
func (f *egressFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.mode, "egress", "default", "outbound policy: default or hosted (the operator's policy: https only, loopback, link-local, metadata and private ranges refused at dial time)")
	fs.StringArrayVar(&f.allowCIDRs, "allow-cidr", nil, "with --egress hosted: private range that may be reached, e.g. 10.0.0.0/8 (repeatable)")
	fs.BoolVar(&f.allowLoopback, "allow-loopback", false, "with --egress hosted: allow loopback destinations and plain http to them (development only)")
}

// policy returns the hosted IP policy, or nil in default mode.
func (f *egressFlags) policy() (*egress.IPPolicy, error) {
	switch f.mode {
	case "", "default":
		if len(f.allowCIDRs) > 0 || f.allowLoopback {
			return nil, usagef("--allow-cidr and --allow-loopback need --egress hosted")
		}
		return nil, nil
	case "hosted":
	default:
		return nil, usagef("--egress: want default or hosted, got %q", f.mode)
	}
	cidrs, err := egress.ParseCIDRs(f.allowCIDRs)
	if err != nil {
		return nil, usagef("--allow-cidr: %v", err)
	}
	ip := &egress.IPPolicy{AllowCIDRs: cidrs}
	if f.allowLoopback {
		ip.Loopback = egress.LoopbackAllowedUnsafe
	}
	return ip, nil
}

// httpClient returns the HTTP client to use for target, or nil to use the caller's default.
//
// In hosted mode, a target with a path (an MCP server URL) gets the exchange port bound to its
// scheme, host and port: redirects refused, the server-push GET stream declined, bodies
// bounded. A bare host (a registry, whose blobs redirect elsewhere) gets the guarded streaming
// client with no host binding: every redirect hop is re-checked at dial time and
// Authorization never crosses hosts. Refusals are named (exit 3).
func (f *egressFlags) httpClient(target *url.URL) (*http.Client, error) {
	ip, err := f.policy()
	if err != nil || ip == nil {
		return nil, err
	}
	if target == nil || target.Host == "" {
		return nil, usagef("egress: no target host")
	}
	if target.Path == "" && target.RawQuery == "" {
		return egress.NewHTTPClient(egress.Policy{IP: *ip, MaxRedirects: registryMaxRedirects})
	}
	ep := url.URL{Scheme: target.Scheme, Host: target.Host, Path: target.Path}
	t, err := egress.NewTransport(egress.Policy{Endpoint: ep.String(), IP: *ip})
	if err != nil {
		return nil, err
	}
	return t.HTTPClient(), nil
}

// defaultRegistryPrivateRanges are the private ranges the default-mode registry client may reach:
// the user's own networks (RFC 1918, CGNAT, IPv6 ULA), where company registries live. Metadata,
// link-local, unspecified, multicast, reserved and documentation addresses stay refused.
var defaultRegistryPrivateRanges = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("fc00::/7"),
}

// registryHTTPClient returns the HTTP client of the OCI registry client for target (scheme and
// registry host). It is always built from egress, never http.DefaultClient: no proxy from the
// environment, the IP policy judged at dial time on every redirect hop, Authorization never
// crossing hosts, bounded bodies and a per-exchange deadline.
//
// In hosted mode it is httpClient's guarded client. In default mode the IP policy is the laptop
// one: private ranges (defaultRegistryPrivateRanges) may be reached, loopback only when the
// registry itself is named as loopback (so a remote registry's redirect never reaches the user's
// own machine), and metadata, link-local and the other special addresses never.
func (f *egressFlags) registryHTTPClient(target *url.URL) (*http.Client, error) {
	if target == nil || target.Host == "" {
		return nil, usagef("egress: no target host")
	}
	target = &url.URL{Scheme: target.Scheme, Host: target.Host}
	hc, err := f.httpClient(target)
	if err != nil || hc != nil {
		return hc, err
	}
	ip := egress.IPPolicy{AllowCIDRs: defaultRegistryPrivateRanges}
	if ociregistry.IsLoopbackHost(target.Host) {
		ip.Loopback = egress.LoopbackAllowedUnsafe
	}
	return egress.NewHTTPClient(egress.Policy{IP: ip, MaxRedirects: registryMaxRedirects})
}
