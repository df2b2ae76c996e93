package gatewayapp

import (
	"time"

	"github.com/b10x/connector-mcp/internal/appoptions"
	"github.com/b10x/connector-mcp/internal/approval"
	"github.com/b10x/connector-mcp/internal/audit"
	"github.com/b10x/connector-mcp/internal/gateway"
	"github.com/b10x/connector-mcp/internal/invocation"
	"github.com/b10x/connector-mcp/mcpclient"
)

// Options are the gateway's flags.
type Options struct {
	// Shared is the trust, egress and TLS policy, shared with the manager (flags, validation,
	// the resolver, the IP policy, the deny list and the CA bundle).
	appoptions.Shared
	// VerifiedPackNamespace (--verified-pack-namespace) is the namespace of the manager's
	// verified-pack store, read (never written) while a registry is unavailable; empty: not read.
	// The binary defaults it to $POD_NAMESPACE (ApplyEnvDefaults); DefaultOptions leaves it empty.
	VerifiedPackNamespace string
	// RetryInterval is the delay before retrying a transient or waiting verification failure
	// (zero: the registry's 30 s). ProbeTimeout bounds the era negotiation with an upstream.
	// Neither is a flag of the gateway; their defaults equal the manager's.
	RetryInterval, ProbeTimeout time.Duration
	// AuditLog (--audit-log) is where the audit trail of calls goes: stdout, stderr, none,
	// file:PATH or an https webhook receiver (docs/observability.md#audit). AuditLogger, when
	// set, is used instead (tests).
	AuditLog    string
	AuditLogger *audit.Logger
	// AuditWebhookBearerFile (--audit-webhook-bearer-file) holds a bearer token sent with every
	// batch of a webhook --audit-log, read for each POST (a mounted Secret).
	AuditWebhookBearerFile string
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
	// Metrics serves /metrics: HTTPS behind authentication and authorization by default.
	Metrics appoptions.Metrics
	// HealthProbeBindAddress serves /healthz and /readyz.
	HealthProbeBindAddress string
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
	// ApprovalTTL is the default lifetime of an McpApprovalRequest; ApprovalMaxTTL the ceiling of
	// the lifetime a caller may ask for (docs/approval.md).
	ApprovalTTL, ApprovalMaxTTL time.Duration
	// MaxOpenApprovalsPerCaller bounds one caller's open approval requests per namespace
	// (approval_limit_exceeded beyond).
	MaxOpenApprovalsPerCaller int

	// validated is set by a Validate that accepted the options: Setup requires it.
	validated bool
}

// DefaultOptions returns the production defaults.
func DefaultOptions() Options {
	return Options{
		Shared:                 appoptions.DefaultShared(),
		ProbeTimeout:           mcpclient.DefaultProbeTimeout,
		ListenAddress:          ":8443",
		AuditLog:               "stdout",
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
		Metrics:                appoptions.DefaultMetrics(":8080"),
		HealthProbeBindAddress: ":8081",
		DrainTimeout:           30 * time.Second,
		UpstreamSessionMaxAge:  invocation.DefaultMaxSessionAge,
		UpstreamRelistInterval: invocation.DefaultRelistInterval,
		ApprovalTTL:            approval.DefaultTTL,
		ApprovalMaxTTL:         approval.DefaultMaxTTL,

		MaxOpenApprovalsPerCaller: approval.DefaultMaxOpenPerCaller,
	}
}
