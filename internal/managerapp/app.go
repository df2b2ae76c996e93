package managerapp

import (
	"crypto/tls"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/b10x/connector-mcp/internal/audit"

	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/adapters"
	"github.com/b10x/connector-mcp/internal/appoptions"
	"github.com/b10x/connector-mcp/internal/controllers"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
	"github.com/b10x/connector-mcp/internal/ociregistry"
	"github.com/b10x/connector-mcp/internal/packstore"
	"github.com/b10x/connector-mcp/internal/review"
	"github.com/b10x/connector-mcp/mcpclient"
)

// Wired is what Setup registered, for tests.
type Wired struct {
	// Profiles and Deployments are the reconcilers.
	Profiles    *controllers.ProfileReconciler
	Deployments *controllers.DeploymentReconciler
	// TrustPolicies writes McpTrustPolicy status (Ready, Stalled, observedGeneration).
	TrustPolicies *controllers.TrustPolicyReconciler
	// Credentials is the OAuth producer (McpCredential).
	Credentials *controllers.CredentialReconciler
	// Metrics are the registered metrics.
	Metrics *controllers.Metrics
	// Refused is the connector_mcp_refused_deployments collector over the manager's cache.
	Refused *controllers.RefusedCollector
	// DriftWebhook is the drift webhook sink, nil without --drift-webhook-url.
	DriftWebhook *review.WebhookSink
	// Audit is the audit trail (nil with --audit-log=none).
	Audit *audit.Logger
	// AuditWebhook is the audit trail's webhook sink, nil unless --audit-log is a URL.
	AuditWebhook *audit.Webhook
	// Binder is the shared endpoint-binding construction (freeze and credential reads).
	Binder *k8sbinding.Binder
	// EphemeralCredentialHashKey is true when no --credential-hash-key-file was given and a
	// random key is in use.
	EphemeralCredentialHashKey bool
	// PackStore is the verified-pack store, nil when --verified-pack-namespace is empty.
	PackStore *packstore.Store
}

// Setup validates o (the manager's one validation: cmd/manager does not validate its flags
// itself), builds the adapters from it and registers the reconcilers with mgr. Metrics are
// registered with controller-runtime's registry unless registerMetrics is false (tests running
// several managers in one process).
func Setup(mgr ctrl.Manager, o Options, registerMetrics bool) (*Wired, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	ip, err := o.IPPolicy(mgr.GetConfig())
	if err != nil {
		return nil, err
	}
	checks, flags := o.WaivedChecks()
	for i := range checks {
		ctrl.Log.WithName("setup").Info("Warning: a verification check is waived by an unsafe flag", "check", checks[i], "flag", flags[i])
	}
	m := controllers.NewMetrics()
	if registerMetrics {
		if err := m.Register(metrics.Registry); err != nil {
			return nil, err
		}
	}
	// The refused gauge is derived from the informer cache at each scrape.
	refused := controllers.NewRefusedCollector(mgr.GetCache())
	if registerMetrics {
		if err := metrics.Registry.Register(refused); err != nil {
			return nil, err
		}
	}
	// The verified-pack store.
	store, err := setupPackStore(mgr, o)
	if err != nil {
		return nil, err
	}
	var blobs ociregistry.BlobStore // nil, not a typed nil, without a store
	if store != nil {
		blobs = store
	}
	deny, err := o.ClusterDeny(mgr.GetAPIReader())
	if err != nil {
		return nil, err
	}
	resolver, err := o.NewResolver(appoptions.ResolverInputs{IP: ip, Deny: deny, Secrets: mgr.GetClient(), Trust: mgr.GetClient(),
		Store: blobs, CacheHits: m.VerificationCacheHits, CacheMisses: m.VerificationCacheMisses})
	if err != nil {
		return nil, err
	}
	key, ephemeral, err := LoadCredentialHashKey(o.CredentialHashKeyFile)
	if err != nil {
		return nil, err
	}
	tlsCfg, err := o.TLSClientConfig()
	if err != nil {
		return nil, err
	}
	binder := &k8sbinding.Binder{
		Base:       egress.Policy{IP: ip, TLSClientConfig: tlsCfg, Timeout: o.ExchangeTimeout, MaxResponseBytes: o.MaxResponseBytes},
		ConfigMaps: mgr.GetClient(),
		Secrets:    mgr.GetClient(),
		Ceilings:   &k8sbinding.TrustPolicyCeilings{Reader: mgr.GetClient()},
		Deny:       deny,
	}
	freezer := &adapters.Freezer{
		Client: mcpclient.NewClient(&mcpclient.Options{Name: "connector-mcp-manager"}),
		Binder: binder,
		Limits: mcpclient.Limits{ProbeTimeout: o.ProbeTimeout, CallTimeout: o.FreezeTimeout, MaxTools: o.MaxTools},
	}
	w := &Wired{Metrics: m, Refused: refused, Binder: binder, EphemeralCredentialHashKey: ephemeral, PackStore: store}
	shard, err := o.ShardSelector()
	if err != nil {
		return nil, err
	}
	if w.Audit = o.AuditLogger; w.Audit == nil {
		auditLog := ctrl.Log.WithName("audit-webhook")
		in := auditInputs(o, ip, deny, tlsCfg, func(msg string, kv ...any) { auditLog.Info(msg, kv...) })
		if w.Audit, w.AuditWebhook, err = appoptions.SetupAudit(mgr, in, registerMetrics); err != nil {
			return nil, err
		}
	}
	w.Profiles = &controllers.ProfileReconciler{
		Client: mgr.GetClient(), Events: mgr.GetEventRecorder("connector-mcp"), Audit: w.Audit, Resolver: resolver,
		RetryInterval: o.RetryInterval, WaitGracePeriod: o.WaitGracePeriod, Metrics: m, Shard: shard,
		MaxConcurrentReconciles: o.ProfileConcurrency,
	}
	if err := w.Profiles.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	w.Deployments = &controllers.DeploymentReconciler{
		Client: mgr.GetClient(), SecretReader: mgr.GetClient(), Binder: binder, CredentialHashKey: key, Events: mgr.GetEventRecorder("connector-mcp"), Audit: w.Audit,
		Resolver: resolver, Freezer: freezer, ReverifyInterval: o.ReverifyInterval, ReverifyJitter: o.ReverifyJitter,
		HostFreezeLimit: controllers.NewHostFreezeLimiter(o.ReverifyFreezesPerHostPerMinute),
		FreezeTimeout:   o.FreezeTimeout, RetryInterval: o.RetryInterval, WaitGracePeriod: o.WaitGracePeriod, Metrics: m, MaxConcurrentReconciles: o.Concurrency,
		Shard: shard,
	}
	if err := setupDriftWebhook(mgr, o, ip, deny, w, registerMetrics); err != nil {
		return nil, err
	}
	if err := w.Deployments.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	// The gateway's re-verify requests: satisfied ones and those naming no deployment are deleted.
	if err := (&controllers.ReverifyRequestReconciler{Client: mgr.GetClient(), Shard: shard}).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	// Approval requests: expiry, one Event per state, deletion of ended ones after the retention.
	if err := (&controllers.ApprovalRequestReconciler{Client: mgr.GetClient(), Events: mgr.GetEventRecorder("connector-mcp")}).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	w.TrustPolicies = &controllers.TrustPolicyReconciler{Client: mgr.GetClient(), Validate: adapters.ValidateTrustPolicy}
	if err := w.TrustPolicies.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	oauthClient, err := producerHTTPClient(ip, deny, tlsCfg, o.ExchangeTimeout)
	if err != nil {
		return nil, err
	}
	w.Credentials = &controllers.CredentialReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), HTTPClient: oauthClient, Events: mgr.GetEventRecorder("connector-mcp"),
		RefreshSkew: o.CredentialRefreshSkew, RetryInterval: o.RetryInterval, Shard: shard,
		Issuers: &controllers.TrustPolicyIssuers{Reader: mgr.GetClient(), Platform: o.AllowedOAuthIssuers},
	}
	if err := w.Credentials.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	return w, nil
}

// auditInputs are what the manager's audit trail is opened with: --audit-log and its bearer
// file, and for a webhook sink the freezes' IP policy, the cluster deny list, the CA bundle and
// the exchange timeout.
func auditInputs(o Options, ip egress.IPPolicy, deny k8sbinding.DenySource, tlsCfg *tls.Config, log func(string, ...any)) appoptions.AuditInputs {
	return appoptions.AuditInputs{Sink: o.AuditLog, BearerFile: o.AuditWebhookBearerFile,
		IP: ip, Deny: deny, TLSClientConfig: tlsCfg, Timeout: o.ExchangeTimeout, Log: log}
}
