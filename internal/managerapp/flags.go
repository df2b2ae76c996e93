package managerapp

import (
	"github.com/spf13/pflag"

	"github.com/b10x/connector-mcp/internal/appoptions"
)

// BindFlags registers every manager flag on fs with o's values as defaults: the trust, egress
// and TLS policy shared with the gateway (appoptions.Shared) and the reconciler tuning.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	o.Shared.BindFlags(fs)
	fs.DurationVar(&o.ReverifyInterval, "reverify-interval", o.ReverifyInterval, "Period of live re-verification of every deployment (0 disables it).")
	fs.Float64Var(&o.ReverifyJitter, "reverify-jitter", o.ReverifyJitter, "Each deployment re-verifies at its own point in the interval (spread evenly over it), the first at least this fraction of the interval after its last freeze, so at most (1+jitter)×interval apart; 0: exactly every interval.")
	fs.IntVar(&o.ReverifyFreezesPerHostPerMinute, "reverify-freezes-per-host-per-minute", o.ReverifyFreezesPerHostPerMinute, "Most periodic re-verification freezes a minute against one upstream host (scheme, host and port), evenly spaced; 0: no limit. First activations and changes freeze at once but count.")
	fs.DurationVar(&o.RetryInterval, "retry-interval", o.RetryInterval, "Delay before retrying a transient failure.")
	fs.DurationVar(&o.WaitGracePeriod, "wait-grace-period", o.WaitGracePeriod, "How long a refusal that another object can remove (no trust source names the signer yet; a key Secret or grant RoleBinding not yet present) reads Reconciling before it reads Stalled.")
	fs.DurationVar(&o.FreezeTimeout, "freeze-timeout", o.FreezeTimeout, "Deadline of one live freeze (connect, negotiate, list all tools).")
	fs.DurationVar(&o.ProbeTimeout, "probe-timeout", o.ProbeTimeout, "Deadline of protocol era negotiation.")
	fs.IntVar(&o.Concurrency, "concurrency", o.Concurrency, "Number of ServiceDeployments reconciled (and frozen) in parallel.")
	fs.IntVar(&o.MaxTools, "max-tools", o.MaxTools, "Maximum number of tools in one live listing.")
	fs.StringVar(&o.AuditLog, "audit-log", o.AuditLog, "Sink of the audit trail (one JSON line per activation decision): stdout, stderr, none, file:PATH or https://HOST/PATH (a webhook receiving NDJSON batches through egress; a full buffer drops records, counted).")
	fs.StringVar(&o.AuditWebhookBearerFile, appoptions.AuditWebhookBearerFileFlag, o.AuditWebhookBearerFile, "File holding a bearer token for the audit webhook (--audit-log=https://...), read for each batch.")
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
	fs.StringVar(&o.VerifiedPackNamespace, appoptions.VerifiedPackNamespaceFlag, o.VerifiedPackNamespace, "Namespace (the manager's own) of the verified-pack store, which lets packs verify again, offline, after a restart during a registry outage (default $POD_NAMESPACE; empty disables it).")
	fs.DurationVar(&o.VerifiedPackSweepInterval, "verified-pack-sweep-interval", o.VerifiedPackSweepInterval, "Period of the leader's sweep deleting verified-pack store entries that no McpServiceProfile references.")
}

// ApplyEnvDefaults sets the options whose default comes from the environment, unless their flag
// was given on fs (parsed): --verified-pack-namespace defaults to $POD_NAMESPACE
// (appoptions.ApplyPodNamespaceDefault). cmd/manager calls it after parsing its flags.
func (o *Options) ApplyEnvDefaults(fs *pflag.FlagSet, getenv func(string) string) {
	appoptions.ApplyPodNamespaceDefault(fs, &o.VerifiedPackNamespace, getenv)
}
