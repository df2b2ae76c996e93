package appoptions

import (
	"crypto/tls"

	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Metrics is how a binary serves its Prometheus /metrics endpoint: by default over HTTPS behind
// Kubernetes authentication (TokenReview) and authorization (SubjectAccessReview of
// `get` on the non-resource URL /metrics), HTTP/2 off, as kubebuilder scaffolds it.
type Metrics struct {
	// BindAddress (--metrics-bind-address) is the listen address; "0" disables the endpoint.
	BindAddress string
	// Secure (--metrics-secure) serves HTTPS behind authentication and authorization; false
	// serves plain HTTP to anyone who reaches the port (development only).
	Secure bool
	// EnableHTTP2 (--enable-http2) allows HTTP/2 on the served TLS endpoints: metrics, and the
	// manager's webhook server (off: CVE-2023-44487, CVE-2023-39325).
	EnableHTTP2 bool
}

// DefaultMetrics returns the secure defaults, listening on addr.
func DefaultMetrics(addr string) Metrics {
	return Metrics{BindAddress: addr, Secure: true}
}

// BindFlags registers --metrics-bind-address, --metrics-secure and --enable-http2 on fs.
func (m *Metrics) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&m.BindAddress, "metrics-bind-address", m.BindAddress, "Address of the metrics endpoint (\"0\" disables it).")
	fs.BoolVar(&m.Secure, "metrics-secure", m.Secure, "Serve metrics over HTTPS behind Kubernetes authentication and authorization.")
	fs.BoolVar(&m.EnableHTTP2, "enable-http2", m.EnableHTTP2, "Enable HTTP/2 on served endpoints (off by default: CVE-2023-44487, CVE-2023-39325).")
}

// TLSOpts returns the TLS options of every served TLS endpoint: HTTP/1.1 only unless
// EnableHTTP2.
func (m Metrics) TLSOpts() []func(*tls.Config) {
	if m.EnableHTTP2 {
		return nil
	}
	return []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}
}

// ServerOptions returns the controller-runtime metrics server options m describes.
func (m Metrics) ServerOptions() metricsserver.Options {
	o := metricsserver.Options{BindAddress: m.BindAddress, SecureServing: m.Secure, TLSOpts: m.TLSOpts()}
	if m.Secure {
		o.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return o
}
