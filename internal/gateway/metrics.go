package gateway

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the gateway's Prometheus metrics. Labels carry route kinds, outcome names and cache
// names only: never a caller, deployment or operation (unbounded cardinality, tenant data).
type Metrics struct {
	// Requests counts MCP requests by route ("deployment", "meta") and outcome ("ok" or a
	// refusal name).
	Requests *prometheus.CounterVec
	// Calls counts tools/call by route and outcome.
	Calls *prometheus.CounterVec
	// CallDuration is the latency of tools/call by route.
	CallDuration *prometheus.HistogramVec
	// InFlight is the number of requests being served.
	InFlight prometheus.Gauge
	// CacheLookups counts cache lookups by cache ("token", "authz") and result ("hit", "miss").
	CacheLookups *prometheus.CounterVec
	// Surfaces is the number of deployments served.
	Surfaces prometheus.GaugeFunc
	// DirectCalls counts the tools/call requests answered below the go-sdk server (the common
	// request shape of both protocol eras; see docs/gateway.md). They are counted in Requests
	// and Calls too.
	DirectCalls prometheus.Counter
	// Approvals counts approval events by event ("requested", "used" or the refusal name of a
	// refused retry: a bounded set).
	Approvals *prometheus.CounterVec
}

// NewMetrics builds the metrics; surfaces reports the number of served deployments (nil: 0).
func NewMetrics(surfaces func() int) *Metrics {
	if surfaces == nil {
		surfaces = func() int { return 0 }
	}
	return &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "connector_mcp_gateway_requests_total",
			Help: "MCP requests by route and outcome."}, []string{"route", "outcome"}),
		Calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "connector_mcp_gateway_calls_total",
			Help: "tools/call requests by route and outcome."}, []string{"route", "outcome"}),
		CallDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "connector_mcp_gateway_call_duration_seconds",
			Help: "Latency of tools/call through the gateway.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{"route"}),
		InFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "connector_mcp_gateway_inflight_requests",
			Help: "Requests being served."}),
		CacheLookups: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "connector_mcp_gateway_cache_lookups_total",
			Help: "Token and authorization cache lookups by result."}, []string{"cache", "result"}),
		Surfaces: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "connector_mcp_gateway_surfaces",
			Help: "ServiceDeployments served."}, func() float64 { return float64(surfaces()) }),
		DirectCalls: prometheus.NewCounter(prometheus.CounterOpts{Name: "connector_mcp_gateway_direct_calls_total",
			Help: "tools/call requests answered below the go-sdk server."}),
		Approvals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "connector_mcp_gateway_approvals_total",
			Help: "Approval events: requests created, approved calls run, refused retries by refusal."}, []string{"event"}),
	}
}

// Register registers every metric with reg.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.Requests, m.Calls, m.CallDuration, m.InFlight, m.CacheLookups, m.Surfaces, m.DirectCalls, m.Approvals} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// lookup returns an OnLookup hook counting into CacheLookups{cache}.
func (m *Metrics) lookup(cache string) func(bool) {
	hit, miss := m.CacheLookups.WithLabelValues(cache, "hit"), m.CacheLookups.WithLabelValues(cache, "miss")
	return func(h bool) {
		if h {
			hit.Inc()
		} else {
			miss.Inc()
		}
	}
}

// TokenLookupHook returns the OnLookup hook of a TokenAuthenticator.
func (m *Metrics) TokenLookupHook() func(bool) { return m.lookup("token") }

// AuthzLookupHook returns the OnLookup hook of a CachingAuthorizer.
func (m *Metrics) AuthzLookupHook() func(bool) { return m.lookup("authz") }
