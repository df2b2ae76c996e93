package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
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
