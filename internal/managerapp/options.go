package managerapp

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/controllers"
	"github.com/b10x/connector-mcp/internal/packstore"
	"github.com/b10x/connector-mcp/mcpclient"
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
	// WaitGracePeriod is how long a waiting refusal (one another object can remove) reads
	// Reconciling before it reads Stalled.
	WaitGracePeriod time.Duration
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
	// caBundle is what Validate read of CABundleFile (TLSClientConfig).
	caBundle *caBundle
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

// DefaultOptions returns the production defaults.
func DefaultOptions() Options {
	return Options{
		ReverifyInterval: 10 * time.Minute,
		ReverifyJitter:   0.1,
		RetryInterval:    30 * time.Second,
		WaitGracePeriod:  2 * time.Minute,
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
