package appoptions

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/audit"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
	"github.com/b10x/connector-mcp/internal/webhookpost"
)

// AuditWebhookBearerFileFlag is the flag, in both binaries, of the audit webhook's bearer file.
const AuditWebhookBearerFileFlag = "audit-webhook-bearer-file" //nolint:gosec // a flag name, not a credential

// ErrAuditBearerWithoutWebhook is returned (joined) by ValidateAudit for a bearer file without a
// webhook sink.
var ErrAuditBearerWithoutWebhook = errors.New("--" + AuditWebhookBearerFileFlag + " needs a webhook --audit-log (https://HOST/PATH)")

// ValidateAudit checks --audit-log and --audit-webhook-bearer-file: a bearer file needs a webhook
// sink, and a webhook sink's URL must be one the audit webhook's client accepts (https, plain
// http only with allowLoopback; no userinfo, query or fragment). Errors name --audit-log.
func ValidateAudit(sink, bearerFile string, allowLoopback bool) error {
	if !audit.IsWebhook(sink) {
		if bearerFile != "" {
			return ErrAuditBearerWithoutWebhook
		}
		return nil
	}
	if err := webhookpost.CheckURL(sink); err != nil {
		return fmt.Errorf("--audit-log: %w: %w", audit.ErrInvalidSink, err)
	}
	ip := egress.IPPolicy{}
	if allowLoopback {
		ip.Loopback = egress.LoopbackAllowedUnsafe
	}
	// A static (empty) deny list: the client is only checked here, never used.
	if _, err := AuditWebhookClient(sink, "", ip, &k8sbinding.APIServerDeny{}, nil, 0); err != nil {
		return fmt.Errorf("--audit-log: %w", err)
	}
	return nil
}

// AuditWebhookClient is the audit webhook's client: bound to the receiver at url, the bearer
// read from bearerFile for every POST, the cluster deny list at every dial (k8sbinding.NewClient),
// as the drift webhook's.
func AuditWebhookClient(url, bearerFile string, ip egress.IPPolicy, deny k8sbinding.DenySource, tlsCfg *tls.Config, timeout time.Duration) (*http.Client, error) {
	return k8sbinding.NewClient(webhookpost.Policy(egress.Policy{IP: ip, TLSClientConfig: tlsCfg, Timeout: timeout}, url, bearerFile, "audit-webhook"), deny)
}

// AuditInputs are what the audit trail of a binary is opened with.
type AuditInputs struct {
	// Sink is --audit-log; BearerFile --audit-webhook-bearer-file.
	Sink, BearerFile string
	// IP, Deny, TLSClientConfig and Timeout are the binary's egress policy, for a webhook sink.
	IP              egress.IPPolicy
	Deny            k8sbinding.DenySource
	TLSClientConfig *tls.Config
	Timeout         time.Duration
	// Log reports a webhook's dropped batches (nil: nothing).
	Log func(msg string, keysAndValues ...any)
}

// OpenAudit opens the audit trail of in.Sink: audit.Open's sinks, or a webhook sink whose client
// AuditWebhookClient builds. The webhook, when there is one, is returned for the caller to run.
func OpenAudit(in AuditInputs) (*audit.Logger, *audit.Webhook, error) {
	if !audit.IsWebhook(in.Sink) {
		l, err := audit.Open(in.Sink)
		if err != nil {
			return nil, nil, fmt.Errorf("--audit-log: %w", err)
		}
		return l, nil, nil
	}
	hc, err := AuditWebhookClient(in.Sink, in.BearerFile, in.IP, in.Deny, in.TLSClientConfig, in.Timeout)
	if err != nil {
		return nil, nil, fmt.Errorf("--audit-log: %w", err)
	}
	wh, err := audit.NewWebhook(audit.WebhookOptions{URL: in.Sink, Client: hc, Log: in.Log})
	if err != nil {
		return nil, nil, fmt.Errorf("--audit-log: %w", err)
	}
	return audit.New(wh), wh, nil
}

// SetupAudit opens the audit trail (OpenAudit); a webhook sink is run by mgr on every replica
// and its counters are registered with controller-runtime's registry unless registerMetrics is
// false.
func SetupAudit(mgr manager.Manager, in AuditInputs, registerMetrics bool) (*audit.Logger, *audit.Webhook, error) {
	l, wh, err := OpenAudit(in)
	if err != nil || wh == nil {
		return l, nil, err
	}
	if registerMetrics {
		if err := wh.Metrics().Register(metrics.Registry); err != nil {
			return nil, nil, err
		}
	}
	if err := mgr.Add(wh); err != nil {
		return nil, nil, err
	}
	return l, wh, nil
}
