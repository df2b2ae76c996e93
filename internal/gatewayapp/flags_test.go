package gatewayapp

import (
	"errors"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/b10x/connector-mcp/internal/appoptions"
)

// --verified-pack-namespace defaults to $POD_NAMESPACE in the binary (ApplyEnvDefaults), as the
// manager's does; an explicit value (even empty: the store not read) wins, and DefaultOptions
// itself never reads the environment.
func TestVerifiedPackNamespaceDefault(t *testing.T) {
	env := func(k string) string {
		if k == appoptions.EnvPodNamespace {
			return "connector-mcp-system"
		}
		return ""
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "connector-mcp-system"},
		{[]string{"--verified-pack-namespace="}, ""},
		{[]string{"--verified-pack-namespace=ops"}, "ops"},
	} {
		o := DefaultOptions()
		if o.VerifiedPackNamespace != "" {
			t.Fatalf("DefaultOptions: %q, want empty", o.VerifiedPackNamespace)
		}
		fs := pflag.NewFlagSet("gateway", pflag.ContinueOnError)
		o.BindFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		o.ApplyEnvDefaults(fs, env)
		if o.VerifiedPackNamespace != tc.want {
			t.Fatalf("args %v: %q, want %q", tc.args, o.VerifiedPackNamespace, tc.want)
		}
	}
}

// TestAuditWebhookFlags: the gateway's --audit-log takes a webhook URL and
// --audit-webhook-bearer-file its token file, validated as the manager's; the twins: the bearer
// file without a webhook sink, and a URL carrying a token, are refused by name.
func TestAuditWebhookFlags(t *testing.T) {
	o := DefaultOptions()
	o.PlainHTTPUnsafe = true
	fs := pflag.NewFlagSet("gateway", pflag.ContinueOnError)
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
	bad := o
	bad.AuditLog = "none"
	if err := bad.Validate(); !errors.Is(err, appoptions.ErrAuditBearerWithoutWebhook) || bad.validated {
		t.Fatalf("bearer file with --audit-log=none: %v, want ErrAuditBearerWithoutWebhook", err)
	}
	bad.AuditLog = "https://audit.example.com/ingest#token"
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "--audit-log") {
		t.Fatalf("a URL with a fragment: %v, want --audit-log named", err)
	}
	bad.AuditLog = "http://audit.example.com/ingest"
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "--audit-log") {
		t.Fatalf("plain http outside development: %v, want --audit-log named", err)
	}
}
