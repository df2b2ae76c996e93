// Package app wires the connector-mcp gateway: its flags, the informer-fed registry of active
// surfaces (profiles verified with the manager's policy, via cmd/manager/app), TokenReview
// authentication, cached SubjectAccessReview authorization, the egress connector and the HTTP
// server. cmd/gateway runs it; the envtest user stories run the same wiring.
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	managerapp "github.com/b10x/connector-mcp/cmd/manager/app"
	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/egress/k8sbinding"
	"github.com/b10x/connector-mcp/gateway"
	"github.com/b10x/connector-mcp/invocation"
	"github.com/b10x/connector-mcp/mcpclient"
)

// Options are the gateway's flags.
type Options struct {
	// Verify is the cluster trust and egress policy, shared with the manager
	// (managerapp.Options.BindVerifyFlags).
	Verify managerapp.Options
	// ListenAddress is the MCP listener (--listen-address).
	ListenAddress string
	// TLSCertFile and TLSKeyFile are the serving certificate (required unless PlainHTTPUnsafe).
	TLSCertFile, TLSKeyFile string
	// PlainHTTPUnsafe serves plain HTTP: development only (tokens cross the network in clear).
	PlainHTTPUnsafe bool
	// Audience is the token audience (--audience).
	Audience string
	// AuthzCacheTTL bounds how long a SubjectAccessReview decision is reused.
	AuthzCacheTTL time.Duration
	// TokenCacheTTL is the ceiling of how long a TokenReview result is reused.
	TokenCacheTTL time.Duration
	// MaxInflight and MaxInflightPerCaller bound concurrent requests.
	MaxInflight, MaxInflightPerCaller int
	// CallTimeout bounds one tools/call.
	CallTimeout time.Duration
	// MaxRequestBytes bounds one request body.
	MaxRequestBytes int64
	// MaxArgumentBytes and MaxResultBytes bound one call's arguments and result.
	MaxArgumentBytes, MaxResultBytes int
	// MetricsBindAddress and HealthProbeBindAddress serve /metrics and /healthz, /readyz.
	MetricsBindAddress, HealthProbeBindAddress string
	// AllowedHosts are the Host names the gateway answers (empty: go-sdk's loopback default).
	AllowedHosts []string
	// DrainTimeout bounds graceful shutdown.
	DrainTimeout time.Duration
	// UpstreamSessionMaxAge is how long one upstream MCP session is reused; a new session lists
	// the live tools and compares them with the frozen snapshot (live_drift). Negative: a fresh
	// session (and check) per call.
	UpstreamSessionMaxAge time.Duration
	// UpstreamRelistInterval is the staleness bound of an upstream's live tool list: the first call
	// after the last check is this old re-lists the tools first, so a changed server is called for
	// at most about this long (live_drift afterwards). Negative: every call re-lists.
	UpstreamRelistInterval time.Duration
}

// DefaultOptions returns the production defaults.
func DefaultOptions() Options {
	return Options{
		Verify:                 managerapp.DefaultOptions(),
		ListenAddress:          ":8443",
		Audience:               gateway.DefaultAudience,
		AuthzCacheTTL:          gateway.DefaultAuthzCacheTTL,
		TokenCacheTTL:          gateway.DefaultTokenCacheTTL,
		MaxInflight:            gateway.DefaultMaxInflight,
		MaxInflightPerCaller:   gateway.DefaultMaxInflightPerCaller,
		CallTimeout:            gateway.DefaultCallTimeout,
		MaxRequestBytes:        gateway.DefaultMaxRequestBytes,
		MaxArgumentBytes:       mcpclient.DefaultMaxArgumentBytes,
		MaxResultBytes:         mcpclient.DefaultMaxResultBytes,
		MetricsBindAddress:     ":8080",
		HealthProbeBindAddress: ":8081",
		DrainTimeout:           30 * time.Second,
		UpstreamSessionMaxAge:  invocation.DefaultMaxSessionAge,
		UpstreamRelistInterval: invocation.DefaultRelistInterval,
	}
}

// BindFlags registers every gateway flag on fs, the manager's trust and egress flags included.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.ListenAddress, "listen-address", o.ListenAddress, "Address of the MCP listener.")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", o.TLSCertFile, "PEM serving certificate of the MCP listener (required unless --plain-http-unsafe).")
	fs.StringVar(&o.TLSKeyFile, "tls-key-file", o.TLSKeyFile, "PEM private key of --tls-cert-file.")
	fs.BoolVar(&o.PlainHTTPUnsafe, "plain-http-unsafe", o.PlainHTTPUnsafe, "Development only: serve MCP over plain HTTP (bearer tokens cross the network in clear).")
	fs.StringVar(&o.Audience, "audience", o.Audience, "Audience a caller's ServiceAccount token must be issued for.")
	fs.DurationVar(&o.AuthzCacheTTL, "authz-cache-ttl", o.AuthzCacheTTL, "How long a SubjectAccessReview decision is reused: a revoked RoleBinding takes effect within it.")
	fs.DurationVar(&o.TokenCacheTTL, "token-cache-ttl", o.TokenCacheTTL, "Ceiling of how long a TokenReview result is reused (never beyond the token's expiry).")
	fs.IntVar(&o.MaxInflight, "max-inflight", o.MaxInflight, "Maximum requests served at once by this replica (more: 503 overloaded with Retry-After).")
	fs.IntVar(&o.MaxInflightPerCaller, "max-inflight-per-caller", o.MaxInflightPerCaller, "Maximum requests of one caller served at once (more: 429 caller_busy with Retry-After).")
	fs.DurationVar(&o.CallTimeout, "call-timeout", o.CallTimeout, "Deadline of one tools/call (authorization, upstream connect and call).")
	fs.Int64Var(&o.MaxRequestBytes, "max-request-bytes", o.MaxRequestBytes, "Maximum size of one request body (more: 413).")
	fs.IntVar(&o.MaxArgumentBytes, "max-argument-bytes", o.MaxArgumentBytes, "Maximum size of one call's arguments (more: argument_too_large).")
	fs.IntVar(&o.MaxResultBytes, "max-result-bytes", o.MaxResultBytes, "Maximum size of one call's result (more: result_too_large).")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address of the Prometheus /metrics endpoint (\"0\" disables it).")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "Address of /healthz and /readyz.")
	fs.StringSliceVar(&o.AllowedHosts, "allowed-hosts", o.AllowedHosts, "Host header names the gateway answers, e.g. its Service DNS names (repeatable). Empty: only loopback names on loopback addresses.")
	fs.DurationVar(&o.UpstreamSessionMaxAge, "upstream-session-max-age", o.UpstreamSessionMaxAge, "How long one upstream MCP session is reused before a new one is connected (negative: a session per call).")
	fs.DurationVar(&o.UpstreamRelistInterval, "upstream-relist-interval", o.UpstreamRelistInterval, "Staleness bound of an upstream's live tool list: the first call after the last check is this old re-lists the tools and is refused live_drift if they changed, so a changed server is called for at most about this long (negative: every call re-lists).")
	fs.DurationVar(&o.DrainTimeout, "drain-timeout", o.DrainTimeout, "Time given to running calls to finish on shutdown.")
	o.Verify.BindVerifyFlags(fs)
	// durable: the manager's verified-pack store, read only.
	fs.StringVar(&o.Verify.VerifiedPackNamespace, "verified-pack-namespace", o.Verify.VerifiedPackNamespace, "Namespace of the manager's verified-pack store, read (never written) so that a gateway restarted during a registry outage serves what the manager verified (default $POD_NAMESPACE; empty: not read).")
}

// Validate checks the options.
func (o *Options) Validate() error {
	var errs []error
	if !o.PlainHTTPUnsafe && (o.TLSCertFile == "" || o.TLSKeyFile == "") {
		errs = append(errs, errors.New("--tls-cert-file and --tls-key-file are required (or --plain-http-unsafe for development)"))
	}
	if o.Audience == "" {
		errs = append(errs, errors.New("--audience must not be empty"))
	}
	if o.AuthzCacheTTL < 0 || o.TokenCacheTTL < 0 || o.CallTimeout < 0 || o.DrainTimeout < 0 {
		errs = append(errs, errors.New("durations must not be negative"))
	}
	if o.MaxInflight < 1 || o.MaxInflightPerCaller < 1 {
		errs = append(errs, errors.New("--max-inflight and --max-inflight-per-caller must be at least 1"))
	}
	if err := o.Verify.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Wired is what Setup built.
type Wired struct {
	// Gateway is the MCP handler.
	Gateway *gateway.Gateway
	// Registry holds the served surfaces.
	Registry *gateway.Registry
	// Authenticator and Authorizer are the caches.
	Authenticator *gateway.TokenAuthenticator
	Authorizer    *gateway.CachingAuthorizer
	// Metrics are the gateway metrics.
	Metrics *gateway.Metrics

	opts Options
}

// Setup builds the gateway from o on mgr (whose cache must watch ServiceDeployments and
// McpServiceProfiles) and registers its registry controller. Metrics are registered with
// controller-runtime's registry unless registerMetrics is false.
func Setup(mgr ctrl.Manager, o Options, log logr.Logger, registerMetrics bool) (*Wired, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	resolver, err := managerapp.NewResolver(mgr, o.Verify, nil)
	if err != nil {
		return nil, err
	}
	ip, err := managerapp.IPPolicy(mgr.GetConfig(), o.Verify)
	if err != nil {
		return nil, err
	}
	serviceCIDRs, err := egress.ParseCIDRs(o.Verify.ServiceCIDRs)
	if err != nil {
		return nil, err
	}
	tlsCfg, err := o.Verify.TLSClientConfig()
	if err != nil {
		return nil, err
	}
	w := &Wired{opts: o}
	reg := &gateway.Registry{Client: mgr.GetClient(), Resolver: resolver, RetryInterval: o.Verify.RetryInterval, Log: log.WithName("registry")}
	w.Metrics = gateway.NewMetrics(reg.Len)
	if registerMetrics {
		if err := w.Metrics.Register(metrics.Registry); err != nil {
			return nil, err
		}
	}
	w.Authorizer = &gateway.CachingAuthorizer{Next: &invocation.SubjectAccessReviewer{Client: mgr.GetClient()}, TTL: o.AuthzCacheTTL,
		OnLookup: w.Metrics.AuthzLookupHook()}
	audit := log.WithName("audit")
	reg.Surface = invocation.Options{
		Connector: &invocation.EgressConnector{
			Client:  mcpclient.NewClient(&mcpclient.Options{Name: "connector-mcp-gateway"}),
			Secrets: mgr.GetAPIReader(),
			// The manager's egress rules exactly: each namespace's ceiling (McpTrustPolicy) and the
			// always-denied apiserver addresses and Service ranges.
			Ceilings:         &k8sbinding.TrustPolicyCeilings{Reader: mgr.GetClient()},
			Deny:             &k8sbinding.APIServerDeny{Reader: mgr.GetAPIReader(), Static: serviceCIDRs},
			ConfigMaps:       mgr.GetAPIReader(),
			TLSClientConfig:  tlsCfg,
			IP:               ip,
			ExchangeTimeout:  o.Verify.ExchangeTimeout,
			MaxResponseBytes: o.Verify.MaxResponseBytes,
			Limits:           mcpclient.Limits{ProbeTimeout: o.Verify.ProbeTimeout, CallTimeout: o.CallTimeout},
		},
		Authorizer:       w.Authorizer,
		Schemas:          invocation.NewSchemaCache(),
		MaxArgumentBytes: o.MaxArgumentBytes,
		MaxResultBytes:   o.MaxResultBytes,
		MaxSessionAge:    o.UpstreamSessionMaxAge,
		RelistInterval:   o.UpstreamRelistInterval,
		Audit: func(_ context.Context, e invocation.AuditEvent) {
			audit.Info("Audit", "action", e.Action, "user", e.User, "namespace", e.Target.Namespace, "deployment", e.Target.Name,
				"operation", e.Operation, "snapshot", e.Snapshot, "outcome", e.Outcome, "durationSeconds", e.Duration.Seconds())
		},
	}
	if err := reg.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	w.Registry = reg
	w.Authenticator = &gateway.TokenAuthenticator{Client: mgr.GetClient(), Audience: o.Audience, CacheTTL: o.TokenCacheTTL,
		OnLookup: w.Metrics.TokenLookupHook()}
	w.Gateway, err = gateway.New(gateway.Config{
		Registry: reg, Authenticator: w.Authenticator, Authorizer: w.Authorizer,
		Reverifier: &gateway.Reverifier{Client: mgr.GetClient()}, Events: mgr.GetEventRecorder("connector-mcp-gateway"),
		MaxInflight: o.MaxInflight, MaxInflightPerCaller: o.MaxInflightPerCaller, CallTimeout: o.CallTimeout,
		MaxRequestBytes: o.MaxRequestBytes, AllowedHosts: o.AllowedHosts, Metrics: w.Metrics, Log: log.WithName("gateway"),
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// Serve serves the gateway on ln until ctx is done, then drains running calls (at most
// DrainTimeout) and stops. TLS is used unless PlainHTTPUnsafe; HTTP/2 is off.
func (w *Wired) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: w.Gateway.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second,
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){}}
	if !w.opts.PlainHTTPUnsafe {
		cert, err := tls.LoadX509KeyPair(w.opts.TLSCertFile, w.opts.TLSKeyFile)
		if err != nil {
			return fmt.Errorf("gateway: serving certificate: %w", err)
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}})
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	dctx, cancel := context.WithTimeout(context.Background(), w.opts.DrainTimeout)
	defer cancel()
	derr := w.Gateway.Drain(dctx)
	serr := srv.Shutdown(dctx)
	w.Registry.Close()
	return errors.Join(derr, serr)
}

// Ready is the readiness check: failing while draining.
func (w *Wired) Ready(*http.Request) error {
	if w.Gateway.Draining() {
		return errors.New("draining")
	}
	return nil
}
