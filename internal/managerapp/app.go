// Package app wires the connector-mcp manager: flags for the cluster policy, the real
// adapters (mcpclient and egress for live freezes, ocipack for pack verification), metrics and
// both reconcilers. cmd/manager runs it; the envtest user stories run the same wiring against a
// test control plane.
package managerapp

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/controllers"
	"github.com/b10x/connector-mcp/internal/controllers/adapters"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
	"github.com/b10x/connector-mcp/internal/packstore"
	"github.com/b10x/connector-mcp/internal/review"
	"github.com/b10x/connector-mcp/mcpclient"
	"github.com/b10x/connector-mcp/mcpclient/oauth"
	"github.com/b10x/connector-mcp/ocipack"
)

// Options is the cluster policy and tuning of the manager.
type Options struct {
	// SkipProvenanceUnsafe (--skip-provenance-unsafe) accepts inline profiles, and packs of a
	// trusted signer whose trust source lists no provenance rule on their signature alone: it
	// waives the merge verification. Development clusters only.
	SkipProvenanceUnsafe bool
	// KeylessWithoutTlogUnsafe (--keyless-without-tlog-unsafe) accepts keyless packs that carry
	// no transparency-log entry (a signed timestamp from the trusted root's TSA then suffices).
	KeylessWithoutTlogUnsafe bool
	// KeylessRequireSignedTimestamp (--keyless-require-signed-timestamp) also requires an
	// RFC 3161 signed timestamp on keyless packs.
	KeylessRequireSignedTimestamp bool
	// TrustedRootPath is a sigstore trusted_root.json for keyless verification.
	TrustedRootPath string
	// TrustedRootTUFURL is a TUF repository serving trusted_root.json (e.g. a mirror of
	// public-good Sigstore's); the trusted root is fetched at start through egress and refreshed
	// every 24 hours. TrustedRootTUFRootPath is the TUF root.json it is anchored in (required).
	TrustedRootTUFURL, TrustedRootTUFRootPath string
	// DefaultIssuer, DefaultSubject and DefaultSubjectRegExp form the platform's keyless signer
	// ("default-keyless" in the platform trust source).
	DefaultIssuer, DefaultSubject, DefaultSubjectRegExp string
	// DefaultPublicKeyPath is a PEM public key: the platform's key signer ("default-key").
	DefaultPublicKeyPath string
	// DefaultBuilderID, DefaultSourceRepository and DefaultSourceRef form the platform's
	// provenance rule.
	DefaultBuilderID, DefaultSourceRepository, DefaultSourceRef string
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
	// CredentialHashKeyFile holds the operator's HMAC key for status.credentialHash (at least
	// 32 bytes). Empty: a random key per process, so every deployment with a credential is
	// re-frozen once after each restart.
	CredentialHashKeyFile string
	// AllowLoopbackUnsafe lets freezes and pack pulls reach loopback (plain HTTP included):
	// development and tests only.
	AllowLoopbackUnsafe bool
	// ReverifyInterval is the period of live re-verification; ReverifyJitter its extra fraction.
	ReverifyInterval time.Duration
	ReverifyJitter   float64
	// RetryInterval is the delay before retrying a transient failure.
	RetryInterval time.Duration
	// FreezeTimeout bounds one live freeze; ProbeTimeout the era negotiation; ExchangeTimeout
	// one HTTP exchange.
	FreezeTimeout, ProbeTimeout, ExchangeTimeout time.Duration
	// Concurrency is the number of deployments reconciled in parallel.
	Concurrency int
	// ProfileConcurrency (--profile-concurrency) is the number of McpServiceProfiles verified
	// in parallel.
	ProfileConcurrency int
	// MaxTools and MaxResponseBytes bound a freeze.
	MaxTools         int
	MaxResponseBytes int64

	// The optional drift webhook sink.
	// DriftWebhookURL (--drift-webhook-url) is an https receiver of drift notices (CloudEvents
	// JSON, structured mode), sent through egress under the freezes' IP policy; empty: none.
	DriftWebhookURL string
	// DriftWebhookBearerFile (--drift-webhook-bearer-file) holds a bearer token sent with every
	// notice, read for each delivery (a mounted Secret).
	DriftWebhookBearerFile string
	// CABundleFile (--ca-bundle-file) is a PEM file of extra CA certificates trusted, beside the
	// system roots, for every TLS connection the process makes: OCI registries, the TUF
	// repository, authorization servers and MCP endpoints without their own caBundleRef.
	CABundleFile string
	// CredentialRefreshSkew (--credential-refresh-skew) is how long before expiry the OAuth
	// producer refreshes an McpCredential's access token (spec.refreshSkew overrides it).
	CredentialRefreshSkew time.Duration
	// AllowedOAuthIssuers (--allowed-oauth-issuers) are the OAuth issuers an McpCredential of
	// every namespace may name (the platform's own); McpTrustPolicies add per-namespace ones.
	AllowedOAuthIssuers []string

	// WatchLabelSelector (--watch-label-selector) shards the work: this manager verifies and
	// activates only the McpServiceProfiles and ServiceDeployments whose labels match it, e.g.
	// "sharding.connectors.b10x.io/key in (shard1)". Empty: all of them. Collisions are still
	// judged across shards (the claim index holds every deployment). See docs/operator.md.
	WatchLabelSelector string

	// The verified-pack store.
	// VerifiedPackNamespace (--verified-pack-namespace) is the manager's own namespace, where it
	// keeps the registry content of every pack it verified (one ConfigMap per pack reference,
	// internal/packstore), so that after a restart a pack verifies again, offline, while its
	// registry is down. Empty disables the store. The binaries default it to $POD_NAMESPACE
	// (ApplyEnvDefaults); DefaultOptions leaves it empty.
	VerifiedPackNamespace string
	// VerifiedPackSweepInterval (--verified-pack-sweep-interval) is the period of the leader's
	// sweep deleting store entries no McpServiceProfile references.
	VerifiedPackSweepInterval time.Duration
}

// DefaultProfileConcurrency is the default of --profile-concurrency. With one profile verified
// at a time, 10,000 new profiles took over five minutes to verify on a two-core test machine: each
// pass waits on its status write.
const DefaultProfileConcurrency = 4

// ErrProfileConcurrency is returned (joined) by Options.Validate for a --profile-concurrency
// below 1.
var ErrProfileConcurrency = errors.New("--profile-concurrency must be at least 1")

// DefaultOptions returns the production defaults.
func DefaultOptions() Options {
	return Options{
		ReverifyInterval: 10 * time.Minute,
		ReverifyJitter:   0.1,
		RetryInterval:    30 * time.Second,
		FreezeTimeout:    60 * time.Second,
		ProbeTimeout:     mcpclient.DefaultProbeTimeout,
		ExchangeTimeout:  egress.DefaultTimeout,
		Concurrency:      4,
		MaxTools:         mcpclient.DefaultMaxTools,
		MaxResponseBytes: egress.DefaultMaxResponseBytes,

		CredentialRefreshSkew: controllers.DefaultCredentialRefreshSkew,

		// The verified-pack store (its namespace defaults to $POD_NAMESPACE through
		// ApplyEnvDefaults, in the binaries only).
		VerifiedPackSweepInterval: packstore.DefaultSweepInterval,

		// Profile verification in parallel.
		ProfileConcurrency: DefaultProfileConcurrency,
	}
}

// BindFlags registers every manager flag on fs with o's values as defaults: the verification
// and egress policy (BindVerifyFlags) and the reconciler tuning.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	o.BindVerifyFlags(fs)
	fs.DurationVar(&o.ReverifyInterval, "reverify-interval", o.ReverifyInterval, "Period of live re-verification of every deployment (0 disables it).")
	fs.Float64Var(&o.ReverifyJitter, "reverify-jitter", o.ReverifyJitter, "Maximum extra fraction of the re-verification interval, per deployment.")
	fs.DurationVar(&o.RetryInterval, "retry-interval", o.RetryInterval, "Delay before retrying a transient failure.")
	fs.DurationVar(&o.FreezeTimeout, "freeze-timeout", o.FreezeTimeout, "Deadline of one live freeze (connect, negotiate, list all tools).")
	fs.DurationVar(&o.ProbeTimeout, "probe-timeout", o.ProbeTimeout, "Deadline of protocol era negotiation.")
	fs.IntVar(&o.Concurrency, "concurrency", o.Concurrency, "Number of ServiceDeployments reconciled (and frozen) in parallel.")
	fs.IntVar(&o.MaxTools, "max-tools", o.MaxTools, "Maximum number of tools in one live listing.")
	// Drift webhook sink.
	fs.StringVar(&o.DriftWebhookURL, "drift-webhook-url", o.DriftWebhookURL, "HTTPS receiver of drift notices (CloudEvents JSON naming the deployment, classes and candidate digest), sent through egress; empty disables it.")
	fs.StringVar(&o.DriftWebhookBearerFile, "drift-webhook-bearer-file", o.DriftWebhookBearerFile, "File holding a bearer token for the drift webhook, read for each delivery.")
	// Sharding.
	fs.StringVar(&o.WatchLabelSelector, "watch-label-selector", o.WatchLabelSelector, "Label selector of the McpServiceProfiles and ServiceDeployments this manager reconciles (sharding), e.g. \"sharding.connectors.b10x.io/key in (shard1)\"; empty: all. Collisions are judged across shards.")
	fs.StringVar(&o.CredentialHashKeyFile, "credential-hash-key-file", o.CredentialHashKeyFile, "File holding the HMAC key (at least 32 bytes) of status.credentialHash; keep it stable across restarts (default: a random key per process).")
	// Profile verification in parallel.
	fs.IntVar(&o.ProfileConcurrency, "profile-concurrency", o.ProfileConcurrency, "Number of McpServiceProfiles verified in parallel (pack pulls and status writes wait on the network).")
	// OAuth producer (McpCredential).
	fs.DurationVar(&o.CredentialRefreshSkew, "credential-refresh-skew", o.CredentialRefreshSkew, "How long before expiry the OAuth producer refreshes an McpCredential's access token.")
	fs.StringSliceVar(&o.AllowedOAuthIssuers, "allowed-oauth-issuers", o.AllowedOAuthIssuers, "OAuth issuer (exact https URL) an McpCredential of every namespace may obtain tokens from (comma-separated or repeatable); McpTrustPolicy spec.oauth.allowedIssuers add per-namespace ones.")
	// The verified-pack store.
	fs.StringVar(&o.VerifiedPackNamespace, "verified-pack-namespace", o.VerifiedPackNamespace, "Namespace (the manager's own) of the verified-pack store, which lets packs verify again, offline, after a restart during a registry outage (default $POD_NAMESPACE; empty disables it).")
	fs.DurationVar(&o.VerifiedPackSweepInterval, "verified-pack-sweep-interval", o.VerifiedPackSweepInterval, "Period of the leader's sweep deleting verified-pack store entries that no McpServiceProfile references.")
}

// BindVerifyFlags registers the cluster trust and egress policy flags: the part of the manager's
// configuration that every component verifying packs or dialing endpoints (the manager and the
// gateway) must share, so both verify and dial alike.
func (o *Options) BindVerifyFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.SkipProvenanceUnsafe, "skip-provenance-unsafe", o.SkipProvenanceUnsafe, "Development only: accept inline profiles, and packs of a trusted signer whose trust source lists no provenance rule on their signature alone (waives merge verification).")
	fs.Var(removedFlag("--require-provenance was removed: provenance is always required; --skip-provenance-unsafe waives it (development only)"), "require-provenance", "Removed: see --skip-provenance-unsafe.")
	fs.Lookup("require-provenance").NoOptDefVal = "true"
	_ = fs.MarkHidden("require-provenance")
	fs.BoolVar(&o.KeylessWithoutTlogUnsafe, "keyless-without-tlog-unsafe", o.KeylessWithoutTlogUnsafe, "Accept keyless packs without a transparency-log entry (a signed timestamp from the trusted root's TSA then suffices).")
	fs.BoolVar(&o.KeylessRequireSignedTimestamp, "keyless-require-signed-timestamp", o.KeylessRequireSignedTimestamp, "Also require an RFC 3161 signed timestamp on keyless packs.")
	fs.StringVar(&o.TrustedRootPath, "trusted-root", o.TrustedRootPath, "Path of a sigstore trusted_root.json for keyless verification.")
	fs.StringVar(&o.TrustedRootTUFURL, "trusted-root-tuf-url", o.TrustedRootTUFURL, "TUF repository serving trusted_root.json, fetched through egress and refreshed daily (instead of --trusted-root).")
	fs.StringVar(&o.TrustedRootTUFRootPath, "trusted-root-tuf-root", o.TrustedRootTUFRootPath, "TUF root.json that anchors --trusted-root-tuf-url.")
	fs.StringVar(&o.DefaultIssuer, "default-identity-issuer", o.DefaultIssuer, "OIDC issuer of the platform's keyless signer (trusted in every namespace).")
	fs.StringVar(&o.DefaultSubject, "default-identity-subject", o.DefaultSubject, "Exact certificate subject of the platform's keyless signer.")
	fs.StringVar(&o.DefaultSubjectRegExp, "default-identity-subject-regexp", o.DefaultSubjectRegExp, "Anchored (^...$) certificate subject regular expression of the platform's keyless signer.")
	fs.StringVar(&o.DefaultPublicKeyPath, "default-public-key", o.DefaultPublicKeyPath, "PEM public key of the platform's key signer (trusted in every namespace).")
	fs.StringVar(&o.DefaultBuilderID, "default-builder-id", o.DefaultBuilderID, "SLSA builder.id the platform's provenance rule requires (optional).")
	fs.StringVar(&o.DefaultSourceRepository, "default-source-repository", o.DefaultSourceRepository, "Source repository (primary source) the platform's provenance rule requires.")
	fs.StringVar(&o.DefaultSourceRef, "default-source-ref", o.DefaultSourceRef, "Source ref (e.g. refs/heads/main) the platform's provenance rule requires.")
	fs.StringSliceVar(&o.EgressAllowCIDRs, "egress-allow-cidr", o.EgressAllowCIDRs, "Private CIDR every MCP endpoint and registry may resolve to (repeatable).")
	fs.StringVar(&o.GatewayService, "gateway-service", o.GatewayService, "The gateway's own Service (<namespace>/<name>): its cluster IPs and endpoint addresses are always denied as a destination of every outbound client.")
	fs.StringSliceVar(&o.ServiceCIDRs, "service-cidr", o.ServiceCIDRs, "Service CIDR of the cluster, always denied as an MCP destination (repeatable; one per family). Those listed by the ServiceCIDR API are denied too.")
	fs.BoolVar(&o.AllowLoopbackUnsafe, "allow-loopback-unsafe", o.AllowLoopbackUnsafe, "Development only: allow MCP servers and registries on loopback, over plain HTTP.")
	fs.DurationVar(&o.ExchangeTimeout, "exchange-timeout", o.ExchangeTimeout, "Deadline of one outbound HTTP exchange.")
	fs.Int64Var(&o.MaxResponseBytes, "max-response-bytes", o.MaxResponseBytes, "Maximum size of one outbound HTTP response body.")
	fs.StringVar(&o.CABundleFile, "ca-bundle-file", o.CABundleFile, "PEM file of extra CA certificates trusted beside the system roots by every outbound TLS connection: registries, the TUF repository, authorization servers, and MCP endpoints without their own caBundleRef.")
}

// Validate checks the options.
func (o *Options) Validate() error {
	var errs []error
	for _, iss := range o.AllowedOAuthIssuers {
		if err := controllers.ValidateIssuerURL(iss); err != nil {
			errs = append(errs, fmt.Errorf("--allowed-oauth-issuers: %w", err))
		}
	}
	if o.CredentialRefreshSkew < 0 {
		errs = append(errs, errors.New("--credential-refresh-skew must not be negative"))
	}
	// The verified-pack store.
	if o.VerifiedPackNamespace != "" && o.VerifiedPackSweepInterval <= 0 {
		errs = append(errs, errors.New("--verified-pack-sweep-interval must be positive"))
	}
	if (o.DefaultSubject != "" || o.DefaultSubjectRegExp != "") && o.DefaultIssuer == "" {
		errs = append(errs, errors.New("--default-identity-subject needs --default-identity-issuer"))
	}
	if o.DefaultSubject != "" && o.DefaultSubjectRegExp != "" {
		errs = append(errs, errors.New("set at most one of --default-identity-subject and --default-identity-subject-regexp"))
	}
	if o.DefaultIssuer != "" && o.DefaultSubject == "" && o.DefaultSubjectRegExp == "" {
		errs = append(errs, errors.New("--default-identity-issuer needs --default-identity-subject or --default-identity-subject-regexp"))
	}
	if o.DefaultSubjectRegExp != "" {
		if err := ocipack.CheckSubjectRegExp(o.DefaultSubjectRegExp); err != nil {
			errs = append(errs, fmt.Errorf("--default-identity-subject-regexp: %w", err))
		}
	}
	if (o.DefaultSourceRepository == "") != (o.DefaultSourceRef == "") {
		errs = append(errs, errors.New("--default-source-repository and --default-source-ref go together"))
	}
	if o.TrustedRootPath != "" && o.TrustedRootTUFURL != "" {
		errs = append(errs, errTrustedRootSources)
	}
	if (o.TrustedRootTUFURL == "") != (o.TrustedRootTUFRootPath == "") {
		errs = append(errs, errors.New("--trusted-root-tuf-url and --trusted-root-tuf-root go together"))
	}
	if o.Concurrency < 1 {
		errs = append(errs, errors.New("--concurrency must be at least 1"))
	}
	// Profile verification in parallel.
	if o.ProfileConcurrency < 1 {
		errs = append(errs, ErrProfileConcurrency)
	}
	if o.ReverifyJitter < 0 || o.ReverifyJitter > 1 {
		errs = append(errs, errors.New("--reverify-jitter must be within 0..1"))
	}
	if _, err := o.ShardSelector(); err != nil {
		errs = append(errs, err)
	}
	if _, err := egress.ParseCIDRs(o.EgressAllowCIDRs); err != nil {
		errs = append(errs, fmt.Errorf("--egress-allow-cidr: %w", err))
	}
	if _, err := egress.ParseCIDRs(o.ServiceCIDRs); err != nil {
		errs = append(errs, fmt.Errorf("--service-cidr: %w", err))
	}
	if _, err := k8sbinding.ParseServiceName(o.GatewayService); err != nil {
		errs = append(errs, fmt.Errorf("--gateway-service: %w", err))
	}
	// Drift webhook sink.
	if o.DriftWebhookBearerFile != "" && o.DriftWebhookURL == "" {
		errs = append(errs, errors.New("--drift-webhook-bearer-file needs --drift-webhook-url"))
	}
	if o.DriftWebhookURL != "" {
		ip := egress.IPPolicy{}
		if o.AllowLoopbackUnsafe {
			ip.Loopback = egress.LoopbackAllowedUnsafe
		}
		// A static (empty) deny list: the sink is only checked here, never run.
		if _, err := review.NewWebhookSink(review.WebhookOptions{URL: o.DriftWebhookURL, Egress: egress.Policy{IP: ip}, Deny: &k8sbinding.APIServerDeny{}}); err != nil {
			errs = append(errs, fmt.Errorf("--drift-webhook-url: %w", err))
		}
	}
	if _, err := o.TLSClientConfig(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// WaivedChecks lists the checks o waives by an unsafe option, as shown in every verified
// profile's status.verified.waivedChecks, with the flag that waives each.
func (o *Options) WaivedChecks() (checks, flags []string) {
	if o.SkipProvenanceUnsafe {
		checks, flags = append(checks, adapters.WaivedProvenance), append(flags, "--skip-provenance-unsafe")
	}
	if o.KeylessWithoutTlogUnsafe {
		checks, flags = append(checks, adapters.WaivedKeylessTlog), append(flags, "--keyless-without-tlog-unsafe")
	}
	return checks, flags
}

// removedFlag is a flag that was removed: setting it fails with a message naming its successor.
type removedFlag string

func (r removedFlag) String() string   { return "" }
func (r removedFlag) Set(string) error { return errors.New(string(r)) }
func (r removedFlag) Type() string     { return "bool" }

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
	// Binder is the shared endpoint-binding construction (freeze and credential reads).
	Binder *k8sbinding.Binder
	// EphemeralCredentialHashKey is true when no --credential-hash-key-file was given and a
	// random key is in use.
	EphemeralCredentialHashKey bool
	// PackStore is the verified-pack store, nil when --verified-pack-namespace is empty.
	PackStore *packstore.Store
}

// TLSClientConfig returns the TLS configuration of every outbound connection of o: TLS 1.2 at
// least, verification always on, and the system roots plus the certificates of
// --ca-bundle-file; nil when no bundle file is given (the system roots). The file is parsed
// strictly (k8sbinding.ParseCABundle).
func (o *Options) TLSClientConfig() (*tls.Config, error) {
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

// CacheByObject is the manager cache's per-type configuration: the Secret informer sees only
// Secrets labelled connectors.b10x.io/credential=true, and holds them without managedFields and
// without kubectl's last-applied-configuration annotation (a plaintext copy of the data); the
// ConfigMap informer sees only ConfigMaps labelled connectors.b10x.io/ca-bundle=true; the
// RoleBinding informer holds them without subjects (the grant check reads only roleRef; callers
// are authorized with SubjectAccessReviews). Pass it as cache.Options.ByObject.
func CacheByObject() map[client.Object]cache.ByObject {
	secrets := k8sbinding.CredentialCacheSelector()
	secrets.Transform = leanSecret
	return map[client.Object]cache.ByObject{
		&corev1.Secret{}:      secrets,
		&corev1.ConfigMap{}:   k8sbinding.CABundleCacheSelector(),
		&rbacv1.RoleBinding{}: {Transform: leanRoleBinding},
	}
}

// lastAppliedAnnotation is kubectl's client-side apply record.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// leanSecret is the cache transform of Secrets: no managedFields, no last-applied copy.
func leanSecret(o any) (any, error) {
	if s, ok := o.(*corev1.Secret); ok {
		s.ManagedFields = nil
		delete(s.Annotations, lastAppliedAnnotation)
	}
	return o, nil
}

// leanRoleBinding is the cache transform of RoleBindings: no managedFields, no subjects, no
// annotations (the grant check reads only the name and roleRef).
func leanRoleBinding(o any) (any, error) {
	if rb, ok := o.(*rbacv1.RoleBinding); ok {
		rb.ManagedFields, rb.Subjects, rb.Annotations = nil, nil, nil
	}
	return o, nil
}

// ErrWatchLabelSelector is returned (wrapped) by Options.Validate and ShardSelector for a
// --watch-label-selector that does not parse.
var ErrWatchLabelSelector = errors.New("--watch-label-selector does not parse as a label selector")

// ShardSelector parses WatchLabelSelector: nil when empty (every object).
func (o *Options) ShardSelector() (labels.Selector, error) {
	if strings.TrimSpace(o.WatchLabelSelector) == "" {
		return nil, nil
	}
	sel, err := labels.Parse(o.WatchLabelSelector)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrWatchLabelSelector, err)
	}
	return sel, nil
}

// CacheOptions is the manager cache configuration: CacheByObject (only opted-in Secrets), and
// managedFields stripped from every cached object (no controller reads them; they are often the
// larger part of an object). Every shard caches every profile and deployment: collisions are
// judged across shards.
func CacheOptions() cache.Options {
	return cache.Options{ByObject: CacheByObject(), DefaultTransform: cache.TransformStripManagedFields()}
}

// LeaderElectionID is the leader election lease name of a manager watching selector: the
// shards of one installation each elect their own leader (as Flux's shards do).
func LeaderElectionID(selector string) string {
	const base = "connector-mcp.connectors.b10x.io"
	if strings.TrimSpace(selector) == "" {
		return base
	}
	sum := sha256.Sum256([]byte(selector))
	return fmt.Sprintf("%x-%s", sum[:4], base)
}

// LoadCredentialHashKey reads the HMAC key of status.credentialHash from path; an empty path
// gives a fresh random key (ephemeral true).
func LoadCredentialHashKey(path string) (key []byte, ephemeral bool, err error) {
	if path == "" {
		key = make([]byte, controllers.CredentialHashKeyMinBytes)
		if _, err := rand.Read(key); err != nil {
			return nil, false, err
		}
		return key, true, nil
	}
	key, err = os.ReadFile(path) //nolint:gosec // an operator-given path
	if err != nil {
		return nil, false, fmt.Errorf("--credential-hash-key-file: %w", err)
	}
	if len(key) < controllers.CredentialHashKeyMinBytes {
		return nil, false, fmt.Errorf("--credential-hash-key-file: the key has %d bytes, at least %d are required", len(key), controllers.CredentialHashKeyMinBytes)
	}
	return key, false, nil
}

// Setup builds the adapters from o and registers both reconcilers with mgr. Metrics are
// registered with controller-runtime's registry unless reg is false (tests running several
// managers in one process).
func Setup(mgr ctrl.Manager, o Options, registerMetrics bool) (*Wired, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	ip, err := ipPolicy(mgr.GetConfig(), o)
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
	var blobs ocipack.BlobStore // nil, not a typed nil, without a store
	if store != nil {
		blobs = store
	}
	deny, err := ClusterDeny(mgr, o)
	if err != nil {
		return nil, err
	}
	resolver, err := newResolver(mgr, o, ip, deny, m, blobs)
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
	w.Profiles = &controllers.ProfileReconciler{
		Client: mgr.GetClient(), Events: mgr.GetEventRecorder("connector-mcp"), Resolver: resolver,
		RetryInterval: o.RetryInterval, Metrics: m, Shard: shard,
		MaxConcurrentReconciles: o.ProfileConcurrency,
	}
	if err := w.Profiles.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	w.Deployments = &controllers.DeploymentReconciler{
		Client: mgr.GetClient(), SecretReader: mgr.GetClient(), Binder: binder, CredentialHashKey: key, Events: mgr.GetEventRecorder("connector-mcp"),
		Resolver: resolver, Freezer: freezer, ReverifyInterval: o.ReverifyInterval, ReverifyJitter: o.ReverifyJitter,
		FreezeTimeout: o.FreezeTimeout, RetryInterval: o.RetryInterval, Metrics: m, MaxConcurrentReconciles: o.Concurrency,
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

// setupDriftWebhook builds the drift webhook sink of o (none when no URL is set), runs it with
// mgr and hands it to the deployment reconciler.
func setupDriftWebhook(mgr ctrl.Manager, o Options, ip egress.IPPolicy, deny k8sbinding.DenySource, w *Wired, registerMetrics bool) error {
	if o.DriftWebhookURL == "" {
		return nil
	}
	log := ctrl.Log.WithName("drift-webhook")
	sink, err := driftWebhookSink(o, ip, deny, func(msg string, kv ...any) { log.Info(msg, kv...) })
	if err != nil {
		return err
	}
	if registerMetrics {
		if err := sink.Metrics().Register(metrics.Registry); err != nil {
			return err
		}
	}
	if err := mgr.Add(sink); err != nil {
		return err
	}
	w.DriftWebhook = sink
	w.Deployments.DriftNotifier = sink
	return nil
}

// driftWebhookSink builds the drift webhook sink of o, its client through k8sbinding.NewClient.
func driftWebhookSink(o Options, ip egress.IPPolicy, deny k8sbinding.DenySource, log func(string, ...any)) (*review.WebhookSink, error) {
	tlsCfg, err := o.TLSClientConfig()
	if err != nil {
		return nil, err
	}
	sink, err := review.NewWebhookSink(review.WebhookOptions{
		URL: o.DriftWebhookURL, BearerFile: o.DriftWebhookBearerFile,
		Egress: egress.Policy{IP: ip, TLSClientConfig: tlsCfg, Timeout: o.ExchangeTimeout, MaxResponseBytes: 64 << 10},
		Deny:   deny,
		Log:    log,
	})
	if err != nil {
		return nil, fmt.Errorf("--drift-webhook-url: %w", err)
	}
	return sink, nil
}

// NewResolver builds the profile resolver the manager uses: the pack verifier over the
// egress-guarded registry client, under the cluster trust policy of o. The gateway builds the same
// one, so a profile verifies in both or in neither. m may be nil. With o.VerifiedPackNamespace set,
// its verifier reads the manager's verified-pack store (read-only) while a registry is
// unavailable.
func NewResolver(mgr ctrl.Manager, o Options, m *controllers.Metrics) (*controllers.Resolver, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	ip, err := ipPolicy(mgr.GetConfig(), o)
	if err != nil {
		return nil, err
	}
	// The gateway reads the manager's verified-pack store (never writes it), so that a
	// gateway restarted during a registry outage serves what the manager verified.
	var store ocipack.BlobStore
	if o.VerifiedPackNamespace != "" {
		ro, err := packstore.New(o.VerifiedPackNamespace, mgr.GetAPIReader(), nil, packstore.DefaultMaxBytes, ctrl.Log.WithName("verified-pack-store"))
		if err != nil {
			return nil, err
		}
		store = ro
	}
	deny, err := ClusterDeny(mgr, o)
	if err != nil {
		return nil, err
	}
	// The gateway reads pull and public-key Secrets uncached, by name, in the profile's namespace:
	// it holds no Secret informer and needs no cluster-wide Secret right, only each namespace's
	// consent (a RoleBinding; elsewhere credential_consent_missing).
	return newResolverReading(mgr, o, ip, deny, m, store, mgr.GetAPIReader())
}

// newResolver builds the resolver; store, when not nil, is the verified-pack store of the
// anonymous registry client (the manager's; the gateway has none).
func newResolver(mgr ctrl.Manager, o Options, ip egress.IPPolicy, deny k8sbinding.DenySource, m *controllers.Metrics, store ocipack.BlobStore) (*controllers.Resolver, error) {
	return newResolverReading(mgr, o, ip, deny, m, store, mgr.GetClient())
}

// newResolverReading is newResolver whose verifier reads Secrets through secrets.
func newResolverReading(mgr ctrl.Manager, o Options, ip egress.IPPolicy, deny k8sbinding.DenySource, m *controllers.Metrics, store ocipack.BlobStore, secrets client.Reader) (*controllers.Resolver, error) {
	verifier, err := packVerifier(mgr, o, ip, deny, store, secrets)
	if err != nil {
		return nil, err
	}
	return &controllers.Resolver{Verifier: verifier, RequireProvenance: !o.SkipProvenanceUnsafe, Metrics: m}, nil
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

// packVerifier builds the OCI pack verifier over an egress-guarded registry client.
func packVerifier(mgr ctrl.Manager, o Options, ip egress.IPPolicy, deny k8sbinding.DenySource, store ocipack.BlobStore, secrets client.Reader) (*adapters.PackVerifier, error) {
	tlsCfg, err := o.TLSClientConfig()
	if err != nil {
		return nil, err
	}
	hc, err := registryHTTPClient(ip, deny, tlsCfg, o.ExchangeTimeout)
	if err != nil {
		return nil, err
	}
	trusted, err := loadTrustedRoot(o, hc)
	if err != nil {
		return nil, err
	}
	reg := ocipack.Client{HTTPClient: hc, PlainHTTP: o.AllowLoopbackUnsafe}
	if store != nil {
		// Anonymous pulls read and write the store; a client given a pull secret's
		// credentials does not use it (ocipack.Client.Store).
		reg.Store = store
	}
	opts := []ocipack.VerifierOption{ocipack.WithStrictKeyless()}
	if !o.KeylessWithoutTlogUnsafe {
		opts = append(opts, ocipack.WithKeylessTransparencyLog(1))
	}
	if o.KeylessRequireSignedTimestamp {
		opts = append(opts, ocipack.WithKeylessSignedTimestamps(1))
	}
	waived, _ := o.WaivedChecks()
	v := &adapters.PackVerifier{
		Registry:             reg,
		Secrets:              secrets,
		Trust:                mgr.GetClient(),
		SkipProvenanceUnsafe: o.SkipProvenanceUnsafe,
		Waived:               waived,
		NewVerifier: func(c *ocipack.Client) *ocipack.Verifier {
			return ocipack.NewVerifier(c, trusted, append(opts, ocipack.WithCacheSize(0))...)
		},
	}
	shared := reg
	v.Verifier = ocipack.NewVerifier(&shared, trusted, opts...)
	platform, err := o.platformSource()
	if err != nil {
		return nil, err
	}
	v.Platform = platform
	return v, nil
}

// EnvPodNamespace is the environment variable (set from the downward API by config/manager,
// config/gateway) that --verified-pack-namespace defaults to.
const EnvPodNamespace = "POD_NAMESPACE"

// ApplyEnvDefaults sets the options whose default comes from the environment, unless their flag
// was given on fs (parsed): --verified-pack-namespace defaults to $POD_NAMESPACE. cmd/manager and
// cmd/gateway call it after parsing their flags; tests, which build Options themselves, are not
// affected by the environment they run in.
func (o *Options) ApplyEnvDefaults(fs *pflag.FlagSet, getenv func(string) string) {
	if f := fs.Lookup("verified-pack-namespace"); f != nil && !f.Changed {
		o.VerifiedPackNamespace = getenv(EnvPodNamespace)
	}
}

// setupPackStore builds the verified-pack store of o.VerifiedPackNamespace (nil when empty) and
// adds its Sweeper to mgr. The store reads with the manager's API reader: its ConfigMaps are not
// in the cache.
func setupPackStore(mgr ctrl.Manager, o Options) (*packstore.Store, error) {
	if o.VerifiedPackNamespace == "" {
		return nil, nil
	}
	log := ctrl.Log.WithName("verified-pack-store")
	store, err := packstore.New(o.VerifiedPackNamespace, mgr.GetAPIReader(), mgr.GetClient(), packstore.DefaultMaxBytes, log)
	if err != nil {
		return nil, err
	}
	sweeper := &packstore.Sweeper{Store: store, Profiles: mgr.GetClient(), Deleter: mgr.GetClient(), Interval: o.VerifiedPackSweepInterval, Log: log}
	if err := mgr.Add(sweeper); err != nil {
		return nil, err
	}
	return store, nil
}

// platformSource is the manager's own trust source from its --default-* flags, or nil when they
// name no signer.
func (o *Options) platformSource() (*adapters.TrustSource, error) {
	src := &adapters.TrustSource{Name: adapters.TrustSourcePlatform}
	if o.DefaultIssuer != "" {
		src.Signers = append(src.Signers, adapters.TrustSigner{Name: "default-keyless",
			Keyless: &v1.KeylessIdentity{Issuer: o.DefaultIssuer, Subject: o.DefaultSubject, SubjectRegExp: o.DefaultSubjectRegExp}})
	}
	if o.DefaultPublicKeyPath != "" {
		pem, err := os.ReadFile(o.DefaultPublicKeyPath)
		if err != nil {
			return nil, fmt.Errorf("--default-public-key: %w", err)
		}
		k, err := ocipack.ParsePublicKey(pem)
		if err != nil {
			return nil, fmt.Errorf("--default-public-key: %w", err)
		}
		src.Signers = append(src.Signers, adapters.TrustSigner{Name: "default-key", PublicKey: k})
	}
	if o.DefaultSourceRepository != "" {
		src.Provenance = []v1.ProvenancePolicy{{BuilderID: o.DefaultBuilderID, SourceRepository: o.DefaultSourceRepository, SourceRef: o.DefaultSourceRef}}
	}
	if len(src.Signers) == 0 {
		return nil, nil
	}
	return src, nil
}
