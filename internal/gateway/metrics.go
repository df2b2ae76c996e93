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
	// TokenReviews counts the TokenReviews the gateway made (cache misses) by result (the
	// TokenReview constants: a closed set).
	TokenReviews *prometheus.CounterVec
	// AddedLatency is the time a tools/call that reached its upstream spent in the gateway
	// itself: the request's duration less the upstream exchange's, by route.
	AddedLatency *prometheus.HistogramVec
}

// Results of a TokenReview (the "result" label of connector_mcp_gateway_token_reviews_total).
const (
	// TokenReviewAuthenticated: the apiserver authenticated the token for the gateway's audience.
	TokenReviewAuthenticated = "authenticated"
	// TokenReviewUnauthenticated: the apiserver did not authenticate the token.
	TokenReviewUnauthenticated = "unauthenticated"
	// TokenReviewWrongAudience: the token is valid for other audiences only.
	TokenReviewWrongAudience = "wrong_audience"
	// TokenReviewError: the TokenReview could not be made (apiserver unavailable, throttled,
	// the gateway's RBAC): the caller is refused unauthenticated through no fault of its own.
	TokenReviewError = "error"
)

// TokenReviewResults are the TokenReview results, in order.
var TokenReviewResults = []string{TokenReviewAuthenticated, TokenReviewUnauthenticated, TokenReviewWrongAudience, TokenReviewError}

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
		TokenReviews: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "connector_mcp_gateway_token_reviews_total",
			Help: "TokenReviews made (authentication cache misses) by result: authenticated, unauthenticated, wrong_audience, error."}, []string{"result"}),
		AddedLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "connector_mcp_gateway_added_latency_seconds",
			Help:    "Time a tools/call that reached its upstream spent in the gateway: its duration less the upstream exchange's.",
			Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16)}, []string{"route"}),
	}
}

// Register registers every metric with reg.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.Requests, m.Calls, m.CallDuration, m.InFlight, m.CacheLookups, m.Surfaces, m.DirectCalls, m.Approvals, m.TokenReviews, m.AddedLatency} {
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

// TokenReviewHook returns the OnReview hook of a TokenAuthenticator, counting into TokenReviews.
func (m *Metrics) TokenReviewHook() func(result string) {
	counters := make(map[string]prometheus.Counter, len(TokenReviewResults))
	for _, r := range TokenReviewResults {
		counters[r] = m.TokenReviews.WithLabelValues(r)
	}
	return func(result string) {
		if c, ok := counters[result]; ok {
			c.Inc()
		}
	}
}

// TokenLookupHook returns the OnLookup hook of a TokenAuthenticator.
func (m *Metrics) TokenLookupHook() func(bool) { return m.lookup("token") }

// AuthzLookupHook returns the OnLookup hook of a CachingAuthorizer.
func (m *Metrics) AuthzLookupHook() func(bool) { return m.lookup("authz") }
