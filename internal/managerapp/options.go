package managerapp

import (
	"time"

	"github.com/b10x/connector-mcp/internal/audit"

	"github.com/b10x/connector-mcp/internal/appoptions"
	"github.com/b10x/connector-mcp/internal/controllers"
	"github.com/b10x/connector-mcp/internal/packstore"
	"github.com/b10x/connector-mcp/mcpclient"
)

// Options is the cluster policy and tuning of the manager.
type Options struct {
	// Shared is the trust, egress and TLS policy, shared with the gateway (flags, validation,
	// the resolver, the IP policy, the deny list and the CA bundle).
	appoptions.Shared

	// CredentialHashKeyFile holds the operator's HMAC key for status.credentialHash (at least
	// 32 bytes). Empty: a random key per process, so every deployment with a credential is
	// re-frozen once after each restart.
	CredentialHashKeyFile string
	// ReverifyInterval is the period of live re-verification; ReverifyJitter its extra fraction.
	ReverifyInterval time.Duration
	ReverifyJitter   float64
	// ReverifyFreezesPerHostPerMinute bounds the periodic re-verification freezes against one
	// upstream host a minute (0: no limit).
	ReverifyFreezesPerHostPerMinute int
	// RetryInterval is the delay before retrying a transient failure.
	RetryInterval time.Duration
	// WaitGracePeriod is how long a waiting refusal (one another object can remove) reads
	// Reconciling before it reads Stalled.
	WaitGracePeriod time.Duration
	// FreezeTimeout bounds one live freeze; ProbeTimeout the era negotiation.
	FreezeTimeout, ProbeTimeout time.Duration
	// Concurrency is the number of deployments reconciled in parallel.
	Concurrency int
	// ProfileConcurrency (--profile-concurrency) is the number of McpServiceProfiles verified
	// in parallel.
	ProfileConcurrency int
	// MaxTools bounds a freeze (the response bound is Shared's MaxResponseBytes).
	MaxTools int

	// AuditLog (--audit-log) is where the audit trail of activation decisions goes: stdout,
	// stderr, none, file:PATH or an https webhook receiver (docs/observability.md#audit).
	// AuditLogger, when set, is used instead (tests).
	AuditLog    string
	AuditLogger *audit.Logger
	// AuditWebhookBearerFile (--audit-webhook-bearer-file) holds a bearer token sent with every
	// batch of a webhook --audit-log, read for each POST (a mounted Secret).
	AuditWebhookBearerFile string

	// The optional drift webhook sink.
	// DriftWebhookURL (--drift-webhook-url) is an https receiver of drift notices (CloudEvents
	// JSON, structured mode), sent through egress under the freezes' IP policy; empty: none.
	DriftWebhookURL string
	// DriftWebhookBearerFile (--drift-webhook-bearer-file) holds a bearer token sent with every
	// notice, read for each delivery (a mounted Secret).
	DriftWebhookBearerFile string
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
		Shared:           appoptions.DefaultShared(),
		ReverifyInterval: 10 * time.Minute,
		ReverifyJitter:   0.1,
		RetryInterval:    30 * time.Second,
		WaitGracePeriod:  2 * time.Minute,
		FreezeTimeout:    60 * time.Second,
		ProbeTimeout:     mcpclient.DefaultProbeTimeout,
		Concurrency:      4,
		MaxTools:         mcpclient.DefaultMaxTools,
		AuditLog:         "stdout",

		CredentialRefreshSkew: controllers.DefaultCredentialRefreshSkew,

		// The verified-pack store (its namespace defaults to $POD_NAMESPACE through
		// ApplyEnvDefaults, in the binaries only).
		VerifiedPackSweepInterval: packstore.DefaultSweepInterval,

		// Profile verification in parallel.
		ProfileConcurrency: DefaultProfileConcurrency,
	}
}
