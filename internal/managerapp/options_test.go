package managerapp

import (
	"errors"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/b10x/connector-mcp/internal/appoptions"
)

func TestFlagsDefaultToProduction(t *testing.T) {
	o := DefaultOptions()
	fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
	o.BindFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if o.SkipProvenanceUnsafe || o.KeylessWithoutTlogUnsafe || o.AllowLoopbackUnsafe || o.ReverifyInterval <= 0 {
		t.Fatalf("defaults are not the production policy: %+v", o)
	}
	if checks, _ := o.WaivedChecks(); len(checks) != 0 {
		t.Fatalf("production defaults waive %v", checks)
	}
	if err := fs.Parse([]string{"--skip-provenance-unsafe", "--keyless-without-tlog-unsafe", "--allow-loopback-unsafe", "--egress-allow-cidr=10.96.0.0/12", "--egress-allow-cidr=10.244.0.0/16"}); err != nil {
		t.Fatal(err)
	}
	if !o.SkipProvenanceUnsafe || !o.KeylessWithoutTlogUnsafe || !o.AllowLoopbackUnsafe || len(o.EgressAllowCIDRs) != 2 {
		t.Fatalf("flags not applied: %+v", o)
	}
	checks, flags := o.WaivedChecks()
	if strings.Join(checks, ",") != "provenance,keyless_tlog" || strings.Join(flags, ",") != "--skip-provenance-unsafe,--keyless-without-tlog-unsafe" {
		t.Fatalf("waived %v by %v", checks, flags)
	}
}

// TestValidate: the manager's own checks, and the shared ones (appoptions.Shared.Validate,
// tested there) through the manager's Validate.
func TestValidate(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Options)
		err    string
	}{
		{"defaults", func(*Options) {}, ""},
		{"jitter out of range", func(o *Options) { o.ReverifyJitter = 2 }, "jitter"},
		{"bad CIDR", func(o *Options) { o.EgressAllowCIDRs = []string{"not-a-cidr"} }, "--egress-allow-cidr"},
		{"subject without issuer", func(o *Options) { o.DefaultSubject = "ci" }, "--default-identity-issuer"},
		{"absent CA bundle", func(o *Options) { o.CABundleFile = "/nonexistent/ca.crt" }, "--ca-bundle-file"},
		{"allowed OAuth issuers", func(o *Options) {
			o.AllowedOAuthIssuers = []string{"https://auth.example.com", "http://127.0.0.1:8080"}
		}, ""},
		{"allowed OAuth issuer over plain http", func(o *Options) { o.AllowedOAuthIssuers = []string{"http://auth.example.com"} }, "--allowed-oauth-issuers"},
		{"allowed OAuth issuer with a query", func(o *Options) { o.AllowedOAuthIssuers = []string{"https://auth.example.com?x=1"} }, "--allowed-oauth-issuers"},
		// Drift webhook sink.
		{"drift webhook", func(o *Options) {
			o.DriftWebhookURL, o.DriftWebhookBearerFile = "https://hooks.example.com/drift", "/etc/token"
		}, ""},
		{"drift webhook bearer without URL", func(o *Options) { o.DriftWebhookBearerFile = "/etc/token" }, "needs --drift-webhook-url"},
		{"drift webhook over plain http", func(o *Options) { o.DriftWebhookURL = "http://hooks.example.com/drift" }, "--drift-webhook-url"},
		{"drift webhook token in the query", func(o *Options) { o.DriftWebhookURL = "https://hooks.example.com/drift?token=x" }, "userinfo, a query"},
		// Audit trail webhook sink.
		{"audit webhook", func(o *Options) {
			o.AuditLog, o.AuditWebhookBearerFile = "https://audit.example.com/ingest", "/etc/audit-token"
		}, ""},
		{"audit webhook over plain http in development", func(o *Options) {
			o.AuditLog, o.AllowLoopbackUnsafe = "http://127.0.0.1:9000/ingest", true
		}, ""},
		{"audit bearer without a webhook sink", func(o *Options) { o.AuditWebhookBearerFile = "/etc/audit-token" }, "--audit-webhook-bearer-file needs a webhook --audit-log"},
		{"audit webhook over plain http", func(o *Options) { o.AuditLog = "http://audit.example.com/ingest" }, "--audit-log"},
		{"audit webhook token in the query", func(o *Options) { o.AuditLog = "https://audit.example.com/ingest?token=x" }, "--audit-log: audit: invalid sink: the URL must not carry userinfo, a query"},
		{"audit webhook with userinfo", func(o *Options) { o.AuditLog = "https://user:pw@audit.example.com/ingest" }, "userinfo"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			tc.mutate(&o)
			err := o.Validate()
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.err)
			}
		})
	}
}

// TestProfileConcurrencyFlag: --profile-concurrency defaults to DefaultProfileConcurrency,
// is applied, and a value below 1 is refused with ErrProfileConcurrency (the twin).
func TestProfileConcurrencyFlag(t *testing.T) {
	o := DefaultOptions()
	fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
	o.BindFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if o.ProfileConcurrency != DefaultProfileConcurrency || DefaultProfileConcurrency < 2 {
		t.Fatalf("default --profile-concurrency = %d (DefaultProfileConcurrency %d), want more than one profile at a time", o.ProfileConcurrency, DefaultProfileConcurrency)
	}
	if err := fs.Parse([]string{"--profile-concurrency=8"}); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); o.ProfileConcurrency != 8 || err != nil {
		t.Fatalf("--profile-concurrency=8: got %d, Validate: %v", o.ProfileConcurrency, err)
	}
	if err := fs.Parse([]string{"--profile-concurrency=0"}); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); !errors.Is(err, ErrProfileConcurrency) {
		t.Fatalf("--profile-concurrency=0: Validate = %v, want ErrProfileConcurrency", err)
	}
}

// TestAuditWebhookFlags: --audit-log takes a webhook URL and --audit-webhook-bearer-file its
// token file; the twin: the bearer file alone is refused by name (ErrAuditBearerWithoutWebhook).
func TestAuditWebhookFlags(t *testing.T) {
	o := DefaultOptions()
	fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
	o.BindFlags(fs)
	if err := fs.Parse([]string{"--audit-log=https://audit.example.com/ingest", "--audit-webhook-bearer-file=/var/run/audit/token"}); err != nil {
		t.Fatal(err)
	}
	if o.AuditLog != "https://audit.example.com/ingest" || o.AuditWebhookBearerFile != "/var/run/audit/token" {
		t.Fatalf("flags not applied: %q %q", o.AuditLog, o.AuditWebhookBearerFile)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	o.AuditLog = "stdout"
	if err := o.Validate(); !errors.Is(err, appoptions.ErrAuditBearerWithoutWebhook) {
		t.Fatalf("bearer file with --audit-log=stdout: %v, want ErrAuditBearerWithoutWebhook", err)
	}
}
