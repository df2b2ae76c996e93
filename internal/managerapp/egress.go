package managerapp

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
	"github.com/b10x/connector-mcp/mcpclient/oauth"
)

// TLSClientConfig returns the TLS configuration of every outbound connection of o: TLS 1.2 at
// least, verification always on, and the system roots plus the certificates of
// --ca-bundle-file; nil when no bundle file is given (the system roots). The file is parsed
// strictly (k8sbinding.ParseCABundle).
//
// Validate reads the file once and keeps the result in o (and in the copies of o made after it),
// so the wiring that follows does not read it again.
func (o *Options) TLSClientConfig() (*tls.Config, error) {
	if o.caBundle != nil && o.caBundle.file == o.CABundleFile {
		return o.caBundle.cfg, nil
	}
	return o.readTLSClientConfig()
}

// caBundle is the TLS configuration read from the --ca-bundle-file named file.
type caBundle struct {
	file string
	cfg  *tls.Config
}

// readTLSClientConfig reads --ca-bundle-file (see TLSClientConfig).
func (o *Options) readTLSClientConfig() (*tls.Config, error) {
	if o.CABundleFile == "" {
		return nil, nil
	}
	data, err := os.ReadFile(o.CABundleFile)
	if err != nil {
		return nil, fmt.Errorf("--ca-bundle-file: %w", err)
	}
	if _, err := k8sbinding.ParseCABundle(data); err != nil {
		return nil, fmt.Errorf("--ca-bundle-file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("--ca-bundle-file: %w: no certificate", k8sbinding.ErrInvalidCABundle)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// producerHTTPClient is the OAuth producer's client: discovery and token requests obey the same
// dial-time IP policy and cluster deny list as freezes (an McpCredential's URLs are a tenant's
// choice).
func producerHTTPClient(ip egress.IPPolicy, deny k8sbinding.DenySource, tlsCfg *tls.Config, timeout time.Duration) (*http.Client, error) {
	return k8sbinding.NewClient(egress.Policy{IP: ip, TLSClientConfig: tlsCfg, Timeout: timeout, MaxResponseBytes: oauth.MaxResponseBytes}, deny)
}

// ClusterDeny is the cluster deny list of o that every outbound client of the manager and the
// gateway is built with (k8sbinding.NewClient, k8sbinding.Binder): --service-cidr, the
// ServiceCIDR objects, the apiserver's Service IPs and EndpointSlice addresses and those of
// --gateway-service, read with mgr's uncached API reader.
func ClusterDeny(mgr ctrl.Manager, o Options) (*k8sbinding.APIServerDeny, error) {
	return clusterDeny(mgr.GetAPIReader(), o)
}

// clusterDeny is [ClusterDeny] reading the cluster with r.
func clusterDeny(r client.Reader, o Options) (*k8sbinding.APIServerDeny, error) {
	serviceCIDRs, err := egress.ParseCIDRs(o.ServiceCIDRs)
	if err != nil {
		return nil, err
	}
	d := &k8sbinding.APIServerDeny{Reader: r, Static: serviceCIDRs}
	gw, err := k8sbinding.ParseServiceName(o.GatewayService)
	if err != nil {
		return nil, err
	}
	if gw.Name != "" {
		d.Services = append(d.Services, gw)
	}
	return d, nil
}

// registryHTTPClient is the OCI registry client's (pack pulls, TUF): the cluster deny list at
// every dial, redirects to blob storage re-checked.
func registryHTTPClient(ip egress.IPPolicy, deny k8sbinding.DenySource, tlsCfg *tls.Config, timeout time.Duration) (*http.Client, error) {
	return k8sbinding.NewClient(egress.Policy{IP: ip, TLSClientConfig: tlsCfg, Timeout: timeout, MaxRedirects: 3}, deny)
}

// IPPolicy returns the dial-time address policy of o for the cluster of cfg, the one the
// manager's live freezes use: the gateway dials upstream servers with it.
func IPPolicy(cfg *rest.Config, o Options) (egress.IPPolicy, error) { return ipPolicy(cfg, o) }

// ipPolicy is the cluster's dial-time policy: the apiserver is always denied, private ranges
// only through the allow-list, loopback only in development.
func ipPolicy(cfg *rest.Config, o Options) (egress.IPPolicy, error) {
	allow, err := egress.ParseCIDRs(o.EgressAllowCIDRs)
	if err != nil {
		return egress.IPPolicy{}, err
	}
	var endpoints []string
	if u, err := url.Parse(cfg.Host); err == nil {
		if ip, err := netip.ParseAddr(u.Hostname()); err == nil && (!o.AllowLoopbackUnsafe || !ip.IsLoopback()) {
			endpoints = append(endpoints, ip.String())
		}
	}
	p := egress.IPPolicy{AllowCIDRs: allow, DenyPrefixes: egress.APIServerPrefixes(os.Getenv, endpoints...)}
	if o.AllowLoopbackUnsafe {
		p.Loopback = egress.LoopbackAllowedUnsafe
	}
	return p, p.Validate()
}
