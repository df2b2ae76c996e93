package appoptions

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
)

// Egress is the outbound policy every client of the process dials under: the private ranges
// allowed, the cluster ranges and Services always denied, loopback in development, and the
// bounds of one exchange.
type Egress struct {
	// EgressAllowCIDRs are private ranges every endpoint may resolve to (and every namespace may
	// request in allowCIDRs, beside its McpTrustPolicy ceilings).
	EgressAllowCIDRs []string
	// ServiceCIDRs are the cluster's Service ranges (both families), always denied in addition
	// to those the ServiceCIDR API lists.
	ServiceCIDRs []string
	// GatewayService (--gateway-service, "<namespace>/<name>") is the gateway's own Service: its
	// cluster IPs and EndpointSlice addresses are always denied like the apiserver's, so no
	// deployment sends outbound MCP back into the hosted route.
	GatewayService string
	// AllowLoopbackUnsafe lets freezes, calls and pack pulls reach loopback (plain HTTP
	// included): development and tests only.
	AllowLoopbackUnsafe bool
	// ExchangeTimeout bounds one HTTP exchange.
	ExchangeTimeout time.Duration
	// MaxResponseBytes bounds one HTTP response body.
	MaxResponseBytes int64
}

// DefaultEgress returns the production defaults: egress's exchange deadline and response bound.
func DefaultEgress() Egress {
	return Egress{ExchangeTimeout: egress.DefaultTimeout, MaxResponseBytes: egress.DefaultMaxResponseBytes}
}

// BindFlags registers the egress flags on fs with e's values as defaults.
func (e *Egress) BindFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&e.EgressAllowCIDRs, "egress-allow-cidr", e.EgressAllowCIDRs, "Private CIDR every MCP endpoint and registry may resolve to (repeatable).")
	fs.StringVar(&e.GatewayService, "gateway-service", e.GatewayService, "The gateway's own Service (<namespace>/<name>): its cluster IPs and endpoint addresses are always denied as a destination of every outbound client.")
	fs.StringSliceVar(&e.ServiceCIDRs, "service-cidr", e.ServiceCIDRs, "Service CIDR of the cluster, always denied as an MCP destination (repeatable; one per family). Those listed by the ServiceCIDR API are denied too.")
	fs.BoolVar(&e.AllowLoopbackUnsafe, "allow-loopback-unsafe", e.AllowLoopbackUnsafe, "Development only: allow MCP servers and registries on loopback, over plain HTTP.")
	fs.DurationVar(&e.ExchangeTimeout, "exchange-timeout", e.ExchangeTimeout, "Deadline of one outbound HTTP exchange.")
	fs.Int64Var(&e.MaxResponseBytes, "max-response-bytes", e.MaxResponseBytes, "Maximum size of one outbound HTTP response body.")
}

// Validate checks the ranges and the gateway's Service name.
func (e *Egress) Validate() error {
	var errs []error
	if _, err := egress.ParseCIDRs(e.EgressAllowCIDRs); err != nil {
		errs = append(errs, fmt.Errorf("--egress-allow-cidr: %w", err))
	}
	if _, err := egress.ParseCIDRs(e.ServiceCIDRs); err != nil {
		errs = append(errs, fmt.Errorf("--service-cidr: %w", err))
	}
	if _, err := k8sbinding.ParseServiceName(e.GatewayService); err != nil {
		errs = append(errs, fmt.Errorf("--gateway-service: %w", err))
	}
	return errors.Join(errs...)
}

// IPPolicy returns the dial-time address policy of e for the cluster of cfg, the one every
// outbound client of the manager and the gateway dials under: the apiserver is always denied,
// private ranges only through the allow-list, loopback only in development.
func (e *Egress) IPPolicy(cfg *rest.Config) (egress.IPPolicy, error) {
	allow, err := egress.ParseCIDRs(e.EgressAllowCIDRs)
	if err != nil {
		return egress.IPPolicy{}, err
	}
	var endpoints []string
	if u, err := url.Parse(cfg.Host); err == nil {
		if ip, err := netip.ParseAddr(u.Hostname()); err == nil && (!e.AllowLoopbackUnsafe || !ip.IsLoopback()) {
			endpoints = append(endpoints, ip.String())
		}
	}
	p := egress.IPPolicy{AllowCIDRs: allow, DenyPrefixes: egress.APIServerPrefixes(os.Getenv, endpoints...)}
	if e.AllowLoopbackUnsafe {
		p.Loopback = egress.LoopbackAllowedUnsafe
	}
	return p, p.Validate()
}

// ClusterDeny is the cluster deny list of e that every outbound client of the manager and the
// gateway is built with (k8sbinding.NewClient, k8sbinding.Binder): --service-cidr, the
// ServiceCIDR objects, the apiserver's Service IPs and EndpointSlice addresses and those of
// --gateway-service, read with r (the manager's uncached API reader).
func (e *Egress) ClusterDeny(r client.Reader) (*k8sbinding.APIServerDeny, error) {
	serviceCIDRs, err := egress.ParseCIDRs(e.ServiceCIDRs)
	if err != nil {
		return nil, err
	}
	d := &k8sbinding.APIServerDeny{Reader: r, Static: serviceCIDRs}
	gw, err := k8sbinding.ParseServiceName(e.GatewayService)
	if err != nil {
		return nil, err
	}
	if gw.Name != "" {
		d.Services = append(d.Services, gw)
	}
	return d, nil
}

// RegistryHTTPClient is the OCI registry client's (pack pulls, TUF): the cluster deny list at
// every dial, redirects to blob storage re-checked.
func RegistryHTTPClient(ip egress.IPPolicy, deny k8sbinding.DenySource, tlsCfg *tls.Config, timeout time.Duration) (*http.Client, error) {
	return k8sbinding.NewClient(egress.Policy{IP: ip, TLSClientConfig: tlsCfg, Timeout: timeout, MaxRedirects: 3}, deny)
}
