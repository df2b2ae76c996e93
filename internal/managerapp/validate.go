package managerapp

import (
	"errors"
	"fmt"

	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/adapters"
	"github.com/b10x/connector-mcp/internal/controllers"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
	"github.com/b10x/connector-mcp/internal/ociregistry"
	"github.com/b10x/connector-mcp/internal/review"
)

// ErrProfileConcurrency is returned (joined) by Options.Validate for a --profile-concurrency
// below 1.
var ErrProfileConcurrency = errors.New("--profile-concurrency must be at least 1")

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
		if err := ociregistry.CheckSubjectRegExp(o.DefaultSubjectRegExp); err != nil {
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
	o.caBundle = nil
	if cfg, err := o.readTLSClientConfig(); err != nil {
		errs = append(errs, err)
	} else {
		o.caBundle = &caBundle{file: o.CABundleFile, cfg: cfg}
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
