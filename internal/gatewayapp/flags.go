package gatewayapp

import (
	"github.com/spf13/pflag"

	"github.com/b10x/connector-mcp/internal/appoptions"
)

// BindFlags registers every gateway flag on fs, the trust, egress and TLS flags it shares with
// the manager included.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.AuditLog, "audit-log", o.AuditLog, "Sink of the audit trail (one JSON line per tools/call and per request refused before it): stdout, stderr, none, file:PATH or https://HOST/PATH (a webhook receiving NDJSON batches through egress; a full buffer drops records, counted).")
	fs.StringVar(&o.AuditWebhookBearerFile, appoptions.AuditWebhookBearerFileFlag, o.AuditWebhookBearerFile, "File holding a bearer token for the audit webhook (--audit-log=https://...), read for each batch.")
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
	o.Metrics.BindFlags(fs)
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "Address of /healthz and /readyz.")
	fs.StringSliceVar(&o.AllowedHosts, "allowed-hosts", o.AllowedHosts, "Host header names the gateway answers, e.g. its Service DNS names (repeatable). Empty: only loopback names on loopback addresses.")
	fs.DurationVar(&o.UpstreamSessionMaxAge, "upstream-session-max-age", o.UpstreamSessionMaxAge, "How long one upstream MCP session is reused before a new one is connected (negative: a session per call).")
	fs.DurationVar(&o.UpstreamRelistInterval, "upstream-relist-interval", o.UpstreamRelistInterval, "Staleness bound of an upstream's live tool list: the first call after the last check is this old re-lists the tools and is refused live_drift if they changed, so a changed server is called for at most about this long (negative: every call re-lists).")
	fs.DurationVar(&o.ApprovalTTL, "approval-ttl", o.ApprovalTTL, "Default lifetime of an approval request a call to an operation that requires approval creates.")
	fs.DurationVar(&o.ApprovalMaxTTL, "approval-max-ttl", o.ApprovalMaxTTL, "Ceiling of the lifetime a caller may ask for an approval request (_meta connectors.b10x.io/approval-ttl-seconds).")
	fs.IntVar(&o.MaxOpenApprovalsPerCaller, "max-open-approvals-per-caller", o.MaxOpenApprovalsPerCaller, "Maximum open (pending or approved, unused, unexpired) approval requests of one caller per namespace (more: approval_limit_exceeded).")
	fs.DurationVar(&o.DrainTimeout, "drain-timeout", o.DrainTimeout, "Time given to running calls to finish on shutdown.")
	o.Shared.BindFlags(fs)
	// The manager's verified-pack store, read only.
	fs.StringVar(&o.VerifiedPackNamespace, appoptions.VerifiedPackNamespaceFlag, o.VerifiedPackNamespace, "Namespace of the manager's verified-pack store, read (never written) so that a gateway restarted during a registry outage serves what the manager verified (default $POD_NAMESPACE; empty: not read).")
}

// ApplyEnvDefaults sets the options whose default comes from the environment, unless their flag
// was given on fs (parsed): --verified-pack-namespace defaults to $POD_NAMESPACE
// (appoptions.ApplyPodNamespaceDefault). cmd/gateway calls it after parsing its flags.
func (o *Options) ApplyEnvDefaults(fs *pflag.FlagSet, getenv func(string) string) {
	appoptions.ApplyPodNamespaceDefault(fs, &o.VerifiedPackNamespace, getenv)
}
