// Package gatewayapp wires the connector-mcp gateway: its flags, the informer-fed registry of active
// surfaces (profiles verified with the manager's policy, via internal/managerapp), TokenReview
// authentication, cached SubjectAccessReview authorization, the egress connector and the HTTP
// server. cmd/gateway runs it; the envtest user stories run the same wiring.
package gatewayapp

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
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/b10x/connector-mcp/internal/gateway"
	"github.com/b10x/connector-mcp/internal/invocation"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
	managerapp "github.com/b10x/connector-mcp/internal/managerapp"
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
	// BodyReadTimeout bounds the wait for one request body, read before any slot is taken.
	BodyReadTimeout time.Duration
	// MaxSearchReviews bounds the deployments whose authorization one search_operations checks.
	MaxSearchReviews int
	// AuthFailureRate and AuthFailureBurst limit the failed TokenReviews of one source.
	AuthFailureRate  float64
	AuthFailureBurst int
	// AuthNegativeCacheTTL is how long a refused token is refused without a TokenReview.
	AuthNegativeCacheTTL time.Duration
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
		BodyReadTimeout:        gateway.DefaultBodyReadTimeout,
		MaxSearchReviews:       gateway.DefaultMaxSearchReviews,
		AuthFailureRate:        gateway.DefaultAuthFailureRate,
		AuthFailureBurst:       gateway.DefaultAuthFailureBurst,
		AuthNegativeCacheTTL:   gateway.DefaultNegativeTokenCacheTTL,
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
	fs.DurationVar(&o.BodyReadTimeout, "body-read-timeout", o.BodyReadTimeout, "Deadline for receiving one request body, read before the request takes a slot (later: 408 request_body_timeout).")
	fs.IntVar(&o.MaxSearchReviews, "max-search-reviews", o.MaxSearchReviews, "Maximum deployments whose authorization one search_operations call checks (one SubjectAccessReview each on a cache miss); a search that reaches it answers \"partial\": true.")
	fs.Float64Var(&o.AuthFailureRate, "auth-failure-rate", o.AuthFailureRate, "Failed TokenReviews per second one source address may cause once its burst is spent (more: 429 authentication_rate_limited, no TokenReview).")
	fs.IntVar(&o.AuthFailureBurst, "auth-failure-burst", o.AuthFailureBurst, "Failed TokenReviews one source address may cause at once.")
	fs.DurationVar(&o.AuthNegativeCacheTTL, "auth-negative-cache-ttl", o.AuthNegativeCacheTTL, "How long a token the apiserver refused is refused again without a TokenReview.")
	fs.IntVar(&o.MaxArgumentBytes, "max-argument-bytes", o.MaxArgumentBytes, "Maximum size of one call's arguments (more: argument_too_large).")
	fs.IntVar(&o.MaxResultBytes, "max-result-bytes", o.MaxResultBytes, "Maximum size of one call's result (more: result_too_large).")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address of the Prometheus /metrics endpoint (\"0\" disables it).")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "Address of /healthz and /readyz.")
	fs.StringSliceVar(&o.AllowedHosts, "allowed-hosts", o.AllowedHosts, "Host header names the gateway answers, e.g. its Service DNS names (repeatable). Empty: only loopback names on loopback addresses.")
	fs.DurationVar(&o.UpstreamSessionMaxAge, "upstream-session-max-age", o.UpstreamSessionMaxAge, "How long one upstream MCP session is reused before a new one is connected (negative: a session per call).")
	fs.DurationVar(&o.UpstreamRelistInterval, "upstream-relist-interval", o.UpstreamRelistInterval, "Staleness bound of an upstream's live tool list: the first call after the last check is this old re-lists the tools and is refused live_drift if they changed, so a changed server is called for at most about this long (negative: every call re-lists).")
	fs.DurationVar(&o.DrainTimeout, "drain-timeout", o.DrainTimeout, "Time given to running calls to finish on shutdown.")
	o.Verify.BindVerifyFlags(fs)
	// The manager's verified-pack store, read only.
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
	if o.AuthzCacheTTL < 0 || o.TokenCacheTTL < 0 || o.CallTimeout < 0 || o.DrainTimeout < 0 || o.AuthNegativeCacheTTL < 0 {
		errs = append(errs, errors.New("durations must not be negative"))
	}
	if o.MaxInflight < 1 || o.MaxInflightPerCaller < 1 {
		errs = append(errs, errors.New("--max-inflight and --max-inflight-per-caller must be at least 1"))
	}
	if o.BodyReadTimeout <= 0 {
		errs = append(errs, errors.New("--body-read-timeout must be positive"))
	}
	if o.MaxSearchReviews < 1 {
		errs = append(errs, errors.New("--max-search-reviews must be at least 1"))
	}
	if o.AuthFailureRate <= 0 || o.AuthFailureBurst < 1 {
		errs = append(errs, errors.New("--auth-failure-rate must be positive and --auth-failure-burst at least 1"))
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
	deny, err := managerapp.ClusterDeny(mgr, o.Verify)
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
			// always-denied apiserver addresses, Service ranges and the gateway's own Service.
			Ceilings:         &k8sbinding.TrustPolicyCeilings{Reader: mgr.GetClient()},
			Deny:             deny,
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
	negTTL := o.AuthNegativeCacheTTL
	if negTTL == 0 {
		negTTL = -1 // zero turns the negative cache off (the field's zero is its default)
	}
	w.Authenticator = &gateway.TokenAuthenticator{Client: mgr.GetClient(), Audience: o.Audience, CacheTTL: o.TokenCacheTTL,
		NegativeCacheTTL: negTTL, FailureRate: o.AuthFailureRate, FailureBurst: o.AuthFailureBurst,
		OnLookup: w.Metrics.TokenLookupHook()}
	w.Gateway, err = gateway.New(gateway.Config{
		Registry: reg, Authenticator: w.Authenticator, Authorizer: w.Authorizer,
		Reverifier: &gateway.Reverifier{Client: mgr.GetClient()}, Events: mgr.GetEventRecorder("connector-mcp-gateway"),
		MaxInflight: o.MaxInflight, MaxInflightPerCaller: o.MaxInflightPerCaller, CallTimeout: o.CallTimeout,
		MaxRequestBytes: o.MaxRequestBytes, BodyReadTimeout: o.BodyReadTimeout, MaxSearchReviews: o.MaxSearchReviews,
		AllowedHosts: o.AllowedHosts, Metrics: w.Metrics, Log: log.WithName("gateway"),
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// Serve serves the gateway on ln until ctx is done, then drains running calls (at most
// DrainTimeout) and stops. TLS is used unless PlainHTTPUnsafe; HTTP/2 is off. The server's
// timeouts are those of ServerTimeouts.
func (w *Wired) Serve(ctx context.Context, ln net.Listener) error {
	readHeader, read, write := w.opts.ServerTimeouts()
	srv := &http.Server{Handler: w.Gateway.Handler(), IdleTimeout: 120 * time.Second,
		ReadHeaderTimeout: readHeader, ReadTimeout: read, WriteTimeout: write,
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){}}
	if !w.opts.PlainHTTPUnsafe {
		wctx, stopWatch := context.WithCancel(ctx)
		defer stopWatch()
		getCert, err := watchedCertificate(wctx, w.opts.TLSCertFile, w.opts.TLSKeyFile, 0)
		if err != nil {
			return err
		}
		ln = tls.NewListener(ln, &tls.Config{GetCertificate: getCert, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}})
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

// watchedCertificate loads the serving certificate and key and watches their files until ctx is
// done: a rotated certificate (a renewed Secret mount) is served to new connections without a
// restart. interval is the polling period beside file events (0: certwatcher's default).
func watchedCertificate(ctx context.Context, certFile, keyFile string, interval time.Duration) (func(*tls.ClientHelloInfo) (*tls.Certificate, error), error) {
	cw, err := certwatcher.New(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("gateway: serving certificate: %w", err)
	}
	if interval > 0 {
		cw = cw.WithWatchInterval(interval)
	}
	go func() { _ = cw.Start(ctx) }()
	return cw.GetCertificate, nil
}

// readHeaderTimeout bounds the request line and headers; writeMargin is what WriteTimeout leaves
// above the body read and the call timeout (authentication, writing the answer).
const (
	readHeaderTimeout = 10 * time.Second
	writeMargin       = 30 * time.Second
)

// ServerTimeouts are the HTTP server's timeouts: the headers within 10s; the whole request
// (headers and body) within 10s plus --body-read-timeout (the gateway also sets a per-request
// read deadline of --body-read-timeout on the body, before any slot is taken); the answer
// written within --body-read-timeout plus --call-timeout plus 30s, so a call that runs to its
// deadline still gets its answer written while a reader that stalls does not hold the
// connection forever.
func (o *Options) ServerTimeouts() (readHeader, read, write time.Duration) {
	return readHeaderTimeout, readHeaderTimeout + o.BodyReadTimeout, o.BodyReadTimeout + o.CallTimeout + writeMargin
}

// Ready is the readiness check: failing while draining.
func (w *Wired) Ready(*http.Request) error {
	if w.Gateway.Draining() {
		return errors.New("draining")
	}
	return nil
}
