package gatewayapp

import (
	"errors"
	"net/http"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/b10x/connector-mcp/internal/appoptions"
	"github.com/b10x/connector-mcp/internal/approval"
	"github.com/b10x/connector-mcp/internal/audit"
	"github.com/b10x/connector-mcp/internal/gateway"
	"github.com/b10x/connector-mcp/internal/invocation"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
	"github.com/b10x/connector-mcp/mcpclient"
)

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
	// Audit is the audit trail (nil with --audit-log=none).
	Audit *audit.Logger
	// AuditWebhook is the audit trail's webhook sink, nil unless --audit-log is a URL.
	AuditWebhook *audit.Webhook

	opts Options
}

// Setup builds the gateway from o, which Validate accepted (ErrNotValidated otherwise), on mgr
// (whose cache must watch ServiceDeployments and McpServiceProfiles) and registers its registry
// controller. Metrics are registered with controller-runtime's registry unless registerMetrics
// is false.
func Setup(mgr ctrl.Manager, o Options, log logr.Logger, registerMetrics bool) (*Wired, error) {
	if !o.validated {
		return nil, ErrNotValidated
	}
	ip, err := o.IPPolicy(mgr.GetConfig())
	if err != nil {
		return nil, err
	}
	deny, err := o.ClusterDeny(mgr.GetAPIReader())
	if err != nil {
		return nil, err
	}
	resolver, err := newResolver(mgr, o, ip, deny)
	if err != nil {
		return nil, err
	}
	tlsCfg, err := o.TLSClientConfig()
	if err != nil {
		return nil, err
	}
	w := &Wired{opts: o}
	reg := &gateway.Registry{Client: mgr.GetClient(), Resolver: resolver, RetryInterval: o.RetryInterval, Log: log.WithName("registry")}
	w.Metrics = gateway.NewMetrics(reg.Len)
	if registerMetrics {
		if err := w.Metrics.Register(metrics.Registry); err != nil {
			return nil, err
		}
	}
	w.Authorizer = &gateway.CachingAuthorizer{Next: &invocation.SubjectAccessReviewer{Client: mgr.GetClient()}, TTL: o.AuthzCacheTTL,
		OnLookup: w.Metrics.AuthzLookupHook()}
	if w.Audit = o.AuditLogger; w.Audit == nil {
		auditLog := log.WithName("audit-webhook")
		w.Audit, w.AuditWebhook, err = appoptions.SetupAudit(mgr, appoptions.AuditInputs{Sink: o.AuditLog, BearerFile: o.AuditWebhookBearerFile,
			IP: ip, Deny: deny, TLSClientConfig: tlsCfg, Timeout: o.ExchangeTimeout, Log: func(msg string, kv ...any) { auditLog.Info(msg, kv...) }}, registerMetrics)
		if err != nil {
			return nil, err
		}
	}
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
			ExchangeTimeout:  o.ExchangeTimeout,
			MaxResponseBytes: o.MaxResponseBytes,
			Limits:           mcpclient.Limits{ProbeTimeout: o.ProbeTimeout, CallTimeout: o.CallTimeout},
		},
		Authorizer:       w.Authorizer,
		Schemas:          invocation.NewSchemaCache(),
		MaxArgumentBytes: o.MaxArgumentBytes,
		MaxResultBytes:   o.MaxResultBytes,
		MaxSessionAge:    o.UpstreamSessionMaxAge,
		RelistInterval:   o.UpstreamRelistInterval,
		Gate: &approval.Gate{
			Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Floor: approval.TrustPolicyFloor(mgr.GetClient()),
			TTL: o.ApprovalTTL, MaxTTL: o.ApprovalMaxTTL, MaxOpenPerCaller: o.MaxOpenApprovalsPerCaller,
			OnEvent: func(e approval.Event) { w.Metrics.Approvals.WithLabelValues(e.Kind).Inc() },
			Log:     log.WithName("approval"),
		},
		// Each surface event lands on its request's trail: one audit record per call.
		Audit: gateway.NoteSurfaceEvent,
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
		OnLookup: w.Metrics.TokenLookupHook(), OnReview: w.Metrics.TokenReviewHook()}
	w.Gateway, err = gateway.New(gateway.Config{
		Registry: reg, Authenticator: w.Authenticator, Authorizer: w.Authorizer,
		Reverifier: &gateway.Reverifier{Client: mgr.GetClient()}, Events: mgr.GetEventRecorder("connector-mcp-gateway"),
		MaxInflight: o.MaxInflight, MaxInflightPerCaller: o.MaxInflightPerCaller, CallTimeout: o.CallTimeout,
		MaxRequestBytes: o.MaxRequestBytes, BodyReadTimeout: o.BodyReadTimeout, MaxSearchReviews: o.MaxSearchReviews,
		AllowedHosts: o.AllowedHosts, Metrics: w.Metrics, Audit: w.Audit, Log: log.WithName("gateway"),
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// Ready is the readiness check: failing while draining.
func (w *Wired) Ready(*http.Request) error {
	if w.Gateway.Draining() {
		return errors.New("draining")
	}
	return nil
}
