package managerapp

import (
	"errors"
	"fmt"

	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/appoptions"
	"github.com/b10x/connector-mcp/internal/controllers"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
	"github.com/b10x/connector-mcp/internal/review"
)

// ErrProfileConcurrency is returned (joined) by Options.Validate for a --profile-concurrency
// below 1.
var ErrProfileConcurrency = errors.New("--profile-concurrency must be at least 1")

// Validate checks the options, the shared ones included, and reads the CA bundle (once: the
// wiring uses what it read). Setup calls it; it is the manager's one validation.
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
	errs = append(errs, o.Verification.Validate())
	if o.Concurrency < 1 {
		errs = append(errs, errors.New("--concurrency must be at least 1"))
	}
	// Profile verification in parallel.
	if o.ProfileConcurrency < 1 {
		errs = append(errs, ErrProfileConcurrency)
	}
	if o.ReverifyFreezesPerHostPerMinute < 0 {
		errs = append(errs, errors.New("--reverify-freezes-per-host-per-minute must not be negative"))
	}
	if o.ReverifyJitter < 0 || o.ReverifyJitter > 1 {
		errs = append(errs, errors.New("--reverify-jitter must be within 0..1"))
	}
	if _, err := o.ShardSelector(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, o.Egress.Validate())
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
	// Audit trail sink.
	errs = append(errs, appoptions.ValidateAudit(o.AuditLog, o.AuditWebhookBearerFile, o.AllowLoopbackUnsafe))
	errs = append(errs, o.TLS.Validate())
	return errors.Join(errs...)
}
