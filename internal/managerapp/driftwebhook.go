package managerapp

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
	"github.com/b10x/connector-mcp/internal/review"
)

// setupDriftWebhook builds the drift webhook sink of o (none when no URL is set), runs it with
// mgr and hands it to the deployment reconciler.
func setupDriftWebhook(mgr ctrl.Manager, o Options, ip egress.IPPolicy, deny k8sbinding.DenySource, w *Wired, registerMetrics bool) error {
	if o.DriftWebhookURL == "" {
		return nil
	}
	log := ctrl.Log.WithName("drift-webhook")
	sink, err := driftWebhookSink(o, ip, deny, func(msg string, kv ...any) { log.Info(msg, kv...) })
	if err != nil {
		return err
	}
	if registerMetrics {
		if err := sink.Metrics().Register(metrics.Registry); err != nil {
			return err
		}
	}
	if err := mgr.Add(sink); err != nil {
		return err
	}
	w.DriftWebhook = sink
	w.Deployments.DriftNotifier = sink
	return nil
}

// driftWebhookSink builds the drift webhook sink of o, its client through k8sbinding.NewClient.
func driftWebhookSink(o Options, ip egress.IPPolicy, deny k8sbinding.DenySource, log func(string, ...any)) (*review.WebhookSink, error) {
	tlsCfg, err := o.TLSClientConfig()
	if err != nil {
		return nil, err
	}
	sink, err := review.NewWebhookSink(review.WebhookOptions{
		URL: o.DriftWebhookURL, BearerFile: o.DriftWebhookBearerFile,
		Egress: egress.Policy{IP: ip, TLSClientConfig: tlsCfg, Timeout: o.ExchangeTimeout, MaxResponseBytes: 64 << 10},
		Deny:   deny,
		Log:    log,
	})
	if err != nil {
		return nil, fmt.Errorf("--drift-webhook-url: %w", err)
	}
	return sink, nil
}
