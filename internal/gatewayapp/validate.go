package gatewayapp

import (
	"errors"

	"github.com/b10x/connector-mcp/internal/appoptions"
)

// ErrNotValidated is returned by Setup for options that no Validate accepted.
var ErrNotValidated = errors.New("gatewayapp: the options were not validated")

// Validate checks the options, the shared ones included, and reads the CA bundle (once: the
// wiring uses what it read). cmd/gateway calls it after parsing its flags, before it creates the
// manager; it is the gateway's one validation, and Setup requires it.
func (o *Options) Validate() error {
	o.validated = false
	var errs []error
	if !o.PlainHTTPUnsafe && (o.TLSCertFile == "" || o.TLSKeyFile == "") {
		errs = append(errs, errors.New("--tls-cert-file and --tls-key-file are required (or --plain-http-unsafe for development)"))
	}
	if o.Audience == "" {
		errs = append(errs, errors.New("--audience must not be empty"))
	}
	if o.AuthzCacheTTL < 0 || o.TokenCacheTTL < 0 || o.CallTimeout < 0 || o.DrainTimeout < 0 || o.AuthNegativeCacheTTL < 0 {
		errs = append(errs, errors.New("durations must not be negative"))
	}
	if o.MaxInflight < 1 || o.MaxInflightPerCaller < 1 {
		errs = append(errs, errors.New("--max-inflight and --max-inflight-per-caller must be at least 1"))
	}
	if o.BodyReadTimeout <= 0 {
		errs = append(errs, errors.New("--body-read-timeout must be positive"))
	}
	if o.MaxSearchReviews < 1 {
		errs = append(errs, errors.New("--max-search-reviews must be at least 1"))
	}
	if o.AuthFailureRate <= 0 || o.AuthFailureBurst < 1 {
		errs = append(errs, errors.New("--auth-failure-rate must be positive and --auth-failure-burst at least 1"))
	}
	if o.ApprovalTTL <= 0 || o.ApprovalMaxTTL < o.ApprovalTTL {
		errs = append(errs, errors.New("--approval-ttl must be positive and at most --approval-max-ttl"))
	}
	if o.MaxOpenApprovalsPerCaller < 1 {
		errs = append(errs, errors.New("--max-open-approvals-per-caller must be at least 1"))
	}
	errs = append(errs, o.Shared.Validate())
	errs = append(errs, appoptions.ValidateAudit(o.AuditLog, o.AuditWebhookBearerFile, o.AllowLoopbackUnsafe))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	o.validated = true
	return nil
}
