package controllers

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/b10x/connector-mcp/api/v1"
)

// Metrics are the operator's Prometheus metrics. Register them once with Register.
type Metrics struct {
	// Activations counts deployments that became Ready.
	Activations prometheus.Counter
	// Refusals counts refusals by kind and reason, on each transition into the refusal.
	Refusals *prometheus.CounterVec
	// DriftDetections counts live snapshots that differed from the reviewed one.
	DriftDetections prometheus.Counter
	// DriftClasses counts recorded drift candidates by class (review.Classes): a candidate adds
	// one to every class it contains, once, when its McpSnapshotReview is written.
	DriftClasses *prometheus.CounterVec
	// FreezeDuration observes live freezes, labelled by result (ok, error).
	FreezeDuration *prometheus.HistogramVec
	// VerificationCacheHits counts pack verifications answered from the (digest, policy) cache.
	VerificationCacheHits prometheus.Counter
	// VerificationCacheMisses counts pack verifications that went to the registry.
	VerificationCacheMisses prometheus.Counter
}

// NewMetrics returns unregistered metrics.
func NewMetrics() *Metrics {
	return &Metrics{
		Activations: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "connector_mcp", Name: "activations_total",
			Help: "ServiceDeployments that became Ready."}),
		Refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "connector_mcp", Name: "refusals_total",
			Help: "Refusals by object kind and condition reason, counted on each transition into the refusal."}, []string{"kind", "reason"}),
		DriftDetections: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "connector_mcp", Name: "drift_detections_total",
			Help: "Live freezes whose snapshot differed from the reviewed one."}),
		DriftClasses: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "connector_mcp", Name: "drift_total",
			Help: "Recorded drift candidates by class (text_only, schema_widened, schema_narrowed, annotation_changed, new_tool, removed_tool, protocol_change, other_field)."}, []string{"class"}),
		FreezeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "connector_mcp", Name: "freeze_duration_seconds",
			Help: "Duration of live freezes (connect, negotiate, list all tools).", Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}, []string{"result"}),
		VerificationCacheHits: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "connector_mcp", Name: "verification_cache_hits_total",
			Help: "Pack verifications answered from the (digest, policy) cache."}),
		VerificationCacheMisses: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "connector_mcp", Name: "verification_cache_misses_total",
			Help: "Pack verifications that fetched from the registry."}),
	}
}

// Register registers every metric with reg.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.Activations, m.Refusals, m.DriftDetections, m.DriftClasses, m.FreezeDuration, m.VerificationCacheHits, m.VerificationCacheMisses} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// RefusedDeploymentsMetric is the name of the refused gauge: ServiceDeployments whose Stalled
// condition is True (a refusal that needs a human), per namespace and Stalled reason. The
// namespace label is "deployment_namespace": a "namespace" label would collide with the target
// label Prometheus adds when it scrapes the manager (and be renamed "exported_namespace").
const RefusedDeploymentsMetric = "connector_mcp_refused_deployments"

// refusedReasonOther is the reason label of a Stalled reason this operator does not write (the
// label set stays bounded whatever a status writer puts there).
const refusedReasonOther = "Other"

// refusedReasons are the reasons a Stalled condition may carry, kept as labels.
var refusedReasons = map[string]bool{
	v1.ReasonInlineSourceRefused: true, v1.ReasonVerificationFailed: true, v1.ReasonUntrustedSigner: true,
	v1.ReasonProvenanceMissing: true, v1.ReasonPackInvalid: true, v1.ReasonRegistryUnavailable: true,
	v1.ReasonProfileInvalid: true, v1.ReasonSnapshotDigestMismatch: true, v1.ReasonProfileNotFound: true,
	v1.ReasonProfileNotReady: true, v1.ReasonOperationSetMismatch: true, v1.ReasonEndpointRefInvalid: true,
	v1.ReasonCredentialRefMismatch: true, v1.ReasonGrantNotFound: true, v1.ReasonGrantDenied: true,
	v1.ReasonProviderCollision: true, v1.ReasonAuthorityCollision: true, v1.ReasonOperationCollision: true,
	v1.ReasonEndpointRefused: true, v1.ReasonCredentialNotFound: true, v1.ReasonCredentialRefused: true,
	v1.ReasonServerUnreachable: true, v1.ReasonFreezeRefused: true, v1.ReasonSnapshotDrift: true,
}

// refusedKey is one series of the refused gauge.
type refusedKey struct {
	// Namespace is the deployments' namespace.
	Namespace string
	// Reason is the Stalled reason, or refusedReasonOther.
	Reason string
}

// countRefused counts the refused deployments of items (Stalled=True) by namespace and reason.
// It is the pure part of RefusedCollector.
func countRefused(items []v1.ServiceDeployment) map[refusedKey]int {
	out := map[refusedKey]int{}
	for i := range items {
		c := meta.FindStatusCondition(items[i].Status.Conditions, v1.ConditionStalled)
		if c == nil || c.Status != metav1.ConditionTrue {
			continue
		}
		reason := c.Reason
		if !refusedReasons[reason] {
			reason = refusedReasonOther
		}
		out[refusedKey{Namespace: items[i].Namespace, Reason: reason}]++
	}
	return out
}

// RefusedCollector is the Prometheus collector of
// connector_mcp_refused_deployments{deployment_namespace, reason}. Each scrape lists ServiceDeployments from Reader (the manager's informer cache) and
// counts the refused ones, so the gauge is right after deletes and after a manager restart:
// nothing is incremented or decremented. A namespace without a refused deployment has no series
// (absent means zero). When the cache cannot be read within Timeout the scrape carries no
// series of this gauge, and the failure is logged.
type RefusedCollector struct {
	// Reader lists ServiceDeployments (the manager's cache).
	Reader client.Reader
	// Timeout bounds one list (default 5s).
	Timeout time.Duration
	desc    *prometheus.Desc
}

// NewRefusedCollector returns a collector reading from r.
func NewRefusedCollector(r client.Reader) *RefusedCollector {
	return &RefusedCollector{Reader: r, Timeout: 5 * time.Second, desc: prometheus.NewDesc(RefusedDeploymentsMetric,
		"ServiceDeployments refused (Stalled=True) by namespace and reason, derived from the informer cache at each scrape.",
		[]string{"deployment_namespace", "reason"}, nil)}
}

// Describe sends the gauge's descriptor.
func (c *RefusedCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect lists the deployments and sends one gauge per namespace and reason with refusals.
func (c *RefusedCollector) Collect(ch chan<- prometheus.Metric) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var list v1.ServiceDeploymentList
	if err := c.Reader.List(ctx, &list); err != nil {
		ctrllog.Log.WithName("metrics").Error(err, "Cannot list ServiceDeployments for the refused gauge")
		return
	}
	for k, n := range countRefused(list.Items) {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), k.Namespace, k.Reason)
	}
}
