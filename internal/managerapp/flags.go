package managerapp

import (
	"errors"

	"github.com/spf13/pflag"
)

// BindFlags registers every manager flag on fs with o's values as defaults: the verification
// and egress policy (BindVerifyFlags) and the reconciler tuning.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	o.BindVerifyFlags(fs)
	fs.DurationVar(&o.ReverifyInterval, "reverify-interval", o.ReverifyInterval, "Period of live re-verification of every deployment (0 disables it).")
	fs.Float64Var(&o.ReverifyJitter, "reverify-jitter", o.ReverifyJitter, "Maximum extra fraction of the re-verification interval, per deployment.")
	fs.DurationVar(&o.RetryInterval, "retry-interval", o.RetryInterval, "Delay before retrying a transient failure.")
	fs.DurationVar(&o.WaitGracePeriod, "wait-grace-period", o.WaitGracePeriod, "How long a refusal that another object can remove (no trust source names the signer yet; a key Secret or grant RoleBinding not yet present) reads Reconciling before it reads Stalled.")
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

// removedFlag is a flag that was removed: setting it fails with a message naming its successor.
type removedFlag string

func (r removedFlag) String() string   { return "" }
func (r removedFlag) Set(string) error { return errors.New(string(r)) }
func (r removedFlag) Type() string     { return "bool" }
