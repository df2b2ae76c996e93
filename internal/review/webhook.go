package review

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
	"github.com/b10x/connector-mcp/internal/webhookpost"
)

// The CloudEvents attributes of a drift notice.
const (
	// DriftEventType is the CloudEvents type of a drift notice.
	DriftEventType = "io.b10x.connectors.drift.recorded.v1"
	// CloudEventsContentType is the media type of a structured-mode CloudEvent in JSON.
	CloudEventsContentType = "application/cloudevents+json; charset=utf-8"
)

// Defaults of a [WebhookSink].
const (
	DefaultWebhookQueue = 256
	// DefaultWebhookNamespaceQueue bounds the notices of one namespace waiting for delivery.
	DefaultWebhookNamespaceQueue = 16
	DefaultWebhookMaxAttempts    = 6
	DefaultWebhookMinBackoff     = time.Second
	DefaultWebhookMaxBackoff     = time.Minute
)

// Reasons a notice is dropped (the "reason" label of connector_mcp_drift_webhook_dropped_total):
// webhookpost's closed set.
const (
	// DropQueueFull: the namespace's sub-queue was full when the notice was offered, or the
	// whole queue was full and the notice was the newest of the namespace with the most queued
	// (one flapping tenant loses its own notices, never another namespace's).
	DropQueueFull = webhookpost.DropQueueFull
	// DropRejected: the receiver answered a 4xx status other than 408 and 429 (not retried).
	DropRejected = webhookpost.DropRejected
	// DropRefused: egress refused the exchange (address, scheme, bounds); not retried.
	DropRefused = webhookpost.DropRefused
	// DropRetriesExhausted: every attempt failed with a retryable error (5xx, 408, 429, network).
	DropRetriesExhausted = webhookpost.DropRetriesExhausted
	// DropShutdown: the manager stopped with the notice still queued.
	DropShutdown = webhookpost.DropShutdown
)

// ErrInvalidWebhook is the reason a webhook sink is not built: its URL is not an absolute
// https URL without userinfo, query or fragment, or its options are out of range.
var ErrInvalidWebhook = errors.New("invalid drift webhook")

// DriftNotice is what a drift notice says: the deployment, the classes and the digests. It
// deliberately has no tool names, descriptors or server-reported text: a receiver (a chat room,
// a ticket) must not become a channel for a server's prose.
type DriftNotice struct {
	// Namespace and Deployment name the ServiceDeployment.
	Namespace string `json:"namespace"`
	// Deployment is the ServiceDeployment's name.
	Deployment string `json:"deployment"`
	// ReviewedSnapshotDigest is the active reviewed snapshot.
	ReviewedSnapshotDigest string `json:"reviewedSnapshotDigest"`
	// CandidateSnapshotDigest is the frozen live snapshot awaiting review.
	CandidateSnapshotDigest string `json:"candidateSnapshotDigest"`
	// Classes counts the candidate's tools per class (the Class constants).
	Classes map[string]int32 `json:"classes"`
	// Recorded is the McpSnapshotReview's Recorded reason (CandidateComplete or
	// CandidateTooLarge).
	Recorded string `json:"recorded"`
	// FrozenAt is when the candidate was frozen.
	FrozenAt time.Time `json:"frozenAt"`
}

// NoticeOf returns the drift notice of a recorded review in namespace ns: names, digests,
// class counts and the Recorded reason, nothing the server wrote.
func NoticeOf(ns string, spec *apiv1.McpSnapshotReviewSpec, recorded string) DriftNotice {
	n := DriftNotice{Namespace: ns, Deployment: spec.DeploymentName, ReviewedSnapshotDigest: spec.ReviewedSnapshotDigest,
		CandidateSnapshotDigest: spec.CandidateSnapshotDigest, Recorded: recorded, FrozenAt: spec.FrozenAt.Time, Classes: map[string]int32{}}
	for c, k := range spec.Classes {
		n.Classes[c] = k
	}
	return n
}

// cloudEvent is a CloudEvents 1.0 event in structured JSON mode.
type cloudEvent struct {
	SpecVersion     string      `json:"specversion"`
	Type            string      `json:"type"`
	Source          string      `json:"source"`
	ID              string      `json:"id"`
	Time            string      `json:"time"`
	Subject         string      `json:"subject"`
	DataContentType string      `json:"datacontenttype"`
	Data            DriftNotice `json:"data"`
}

// EncodeDriftEvent returns n as a structured-mode CloudEvent (specversion 1.0). Its id is
// stable for one (deployment, reviewed, candidate) triple, so a receiver can deduplicate
// redeliveries. Class names that are not Class constants are left out.
func EncodeDriftEvent(n DriftNotice) ([]byte, error) {
	classes := map[string]int32{}
	for c, k := range n.Classes {
		if knownClass(c) {
			classes[c] = k
		}
	}
	n.Classes = classes
	h := sha256.Sum256([]byte(n.Namespace + "\x00" + n.Deployment + "\x00" + n.ReviewedSnapshotDigest + "\x00" + n.CandidateSnapshotDigest))
	ev := cloudEvent{
		SpecVersion: "1.0", Type: DriftEventType,
		Source:  "/apis/connectors.b10x.io/v1/namespaces/" + n.Namespace + "/servicedeployments/" + n.Deployment,
		ID:      hex.EncodeToString(h[:16]),
		Time:    n.FrozenAt.UTC().Format(time.RFC3339),
		Subject: n.Namespace + "/" + n.Deployment, DataContentType: "application/json", Data: n,
	}
	return json.Marshal(ev)
}

func knownClass(c string) bool {
	for _, k := range Classes {
		if k == c {
			return true
		}
	}
	return false
}

// WebhookMetrics are the sink's Prometheus counters.
type WebhookMetrics struct {
	// Sent counts notices the receiver accepted (2xx).
	Sent prometheus.Counter
	// Dropped counts notices given up, by reason (the Drop constants).
	Dropped *prometheus.CounterVec
	// QueueFull counts queue_full drops by the namespace whose notice was dropped.
	QueueFull *prometheus.CounterVec
}

// NewWebhookMetrics returns unregistered counters: connector_mcp_drift_webhook_sent_total,
// connector_mcp_drift_webhook_dropped_total{reason} and
// connector_mcp_drift_webhook_queue_full_total{namespace}.
func NewWebhookMetrics() *WebhookMetrics {
	return &WebhookMetrics{
		Sent: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "connector_mcp", Name: "drift_webhook_sent_total",
			Help: "Drift notices the webhook receiver accepted."}),
		Dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "connector_mcp", Name: "drift_webhook_dropped_total",
			Help: "Drift notices given up, by reason (queue_full, rejected, refused, retries_exhausted, shutdown)."}, []string{"reason"}),
		QueueFull: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "connector_mcp", Name: "drift_webhook_queue_full_total",
			Help: "Drift notices dropped because their namespace's share of the queue was full, by namespace."}, []string{"namespace"}),
	}
}

// Register registers the counters with reg.
func (m *WebhookMetrics) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.Sent, m.Dropped, m.QueueFull} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// WebhookOptions configure a [WebhookSink].
type WebhookOptions struct {
	// URL is the receiver: an absolute https URL (no userinfo, query or fragment). Plain http
	// is accepted only when Egress allows loopback (development).
	URL string
	// Egress is the exchange policy (dial-time IP policy, TLS roots, bounds, deadline): pass
	// the one live freezes use. Its Endpoint, Credential, Secrets and Deny are replaced.
	Egress egress.Policy
	// Deny is the cluster deny list (k8sbinding.APIServerDeny), judged at every dial: the
	// receiver is a platform's choice, yet it must not reach the apiserver, a Service CIDR or
	// the gateway's own Service. Required; the client is built by k8sbinding.NewClient.
	Deny egress.DenySource
	// BearerFile, when set, is read for every delivery and sent as "Authorization: Bearer".
	BearerFile string
	// Queue bounds the notices waiting for delivery (default DefaultWebhookQueue).
	Queue int
	// NamespaceQueue bounds the notices of one namespace waiting for delivery (default
	// DefaultWebhookNamespaceQueue, at most Queue). Namespaces are served round-robin.
	NamespaceQueue int
	// MaxAttempts bounds the deliveries of one notice (default DefaultWebhookMaxAttempts).
	MaxAttempts int
	// MinBackoff and MaxBackoff bound the exponential delay between attempts.
	MinBackoff, MaxBackoff time.Duration
	// Metrics counts deliveries and drops (nil: NewWebhookMetrics, unregistered).
	Metrics *WebhookMetrics
	// Log reports drops; nil logs nothing. It never receives the payload or the bearer.
	Log func(msg string, keysAndValues ...any)
}

// WebhookSink delivers drift notices as CloudEvents over HTTPS through egress. Notify never
// blocks: notices wait in per-namespace sub-queues (each bounded by NamespaceQueue, all together
// by Queue) and a full one drops (counted per namespace). One worker, run by Start, serves the
// namespaces round-robin, each in order, with retries and exponential backoff, so a tenant
// whose deployments flap cannot crowd out another namespace's notice.
type WebhookSink struct {
	o      WebhookOptions
	post   *webhookpost.Poster
	mu     sync.Mutex
	closed bool
	// byNS holds the queued notices of each namespace with any; ring orders those namespaces
	// for round-robin service; total counts every queued notice.
	byNS  map[string][]DriftNotice
	ring  []string
	total int
	wake  chan struct{}
	// singleFIFO keys every notice to one sub-queue: the former single FIFO, kept only for
	// the must-fail twin of the fairness test.
	singleFIFO bool
}

// NewWebhookSink checks o and builds the exchange port, bound to the receiver's scheme, host
// and port. A bad URL or option is ErrInvalidWebhook; a bad egress policy wraps
// egress.ErrInvalidPolicy.
func NewWebhookSink(o WebhookOptions) (*WebhookSink, error) {
	if err := webhookpost.CheckURL(o.URL); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidWebhook, err)
	}
	if o.Queue == 0 {
		o.Queue = DefaultWebhookQueue
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = DefaultWebhookMaxAttempts
	}
	if o.MinBackoff == 0 {
		o.MinBackoff = DefaultWebhookMinBackoff
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = DefaultWebhookMaxBackoff
	}
	if o.NamespaceQueue == 0 {
		o.NamespaceQueue = min(DefaultWebhookNamespaceQueue, o.Queue)
	}
	if o.Queue < 1 || o.NamespaceQueue < 1 || o.NamespaceQueue > o.Queue || o.MaxAttempts < 1 || o.MinBackoff < 0 || o.MaxBackoff < o.MinBackoff {
		return nil, fmt.Errorf("%w: queues and attempts must be positive (a namespace's queue at most the whole), backoffs ordered", ErrInvalidWebhook)
	}
	if o.Metrics == nil {
		o.Metrics = NewWebhookMetrics()
	}
	hc, err := k8sbinding.NewClient(webhookpost.Policy(o.Egress, o.URL, o.BearerFile, "drift-webhook"), o.Deny)
	if err != nil {
		return nil, err
	}
	post := &webhookpost.Poster{Client: hc, URL: o.URL, ContentType: CloudEventsContentType,
		MaxAttempts: o.MaxAttempts, MinBackoff: o.MinBackoff, MaxBackoff: o.MaxBackoff}
	return &WebhookSink{o: o, post: post, byNS: map[string][]DriftNotice{}, wake: make(chan struct{}, 1)}, nil
}

// Metrics returns the sink's counters.
func (s *WebhookSink) Metrics() *WebhookMetrics { return s.o.Metrics }

// Notify offers n for delivery without blocking; a full sub-queue or a stopped sink drops it
// (counted as queue_full or shutdown). When the whole queue is full, the newest notice of the
// namespace with the most queued is dropped instead, unless that is n's own namespace.
func (s *WebhookSink) Notify(n DriftNotice) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		s.drop(n, DropShutdown)
		return
	}
	key := s.key(n)
	q := s.byNS[key]
	if len(q) >= s.o.NamespaceQueue {
		s.drop(n, DropQueueFull)
		return
	}
	if s.total >= s.o.Queue {
		longest := key
		for k, kq := range s.byNS {
			if len(kq) > len(s.byNS[longest]) {
				longest = k
			}
		}
		if longest == key {
			s.drop(n, DropQueueFull)
			return
		}
		lq := s.byNS[longest]
		s.drop(lq[len(lq)-1], DropQueueFull)
		s.byNS[longest] = lq[:len(lq)-1]
		s.total--
	}
	if len(q) == 0 {
		s.ring = append(s.ring, key)
	}
	s.byNS[key] = append(q, n)
	s.total++
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// key is the sub-queue of n: its namespace.
func (s *WebhookSink) key(n DriftNotice) string {
	if s.singleFIFO {
		return ""
	}
	return n.Namespace
}

// next pops the next notice round-robin: the oldest of the namespace at the head of the ring,
// which then moves to the back while it has more.
func (s *WebhookSink) next() (DriftNotice, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ring) == 0 {
		return DriftNotice{}, false
	}
	key := s.ring[0]
	s.ring = s.ring[1:]
	q := s.byNS[key]
	n := q[0]
	if len(q) == 1 {
		delete(s.byNS, key)
	} else {
		s.byNS[key] = q[1:]
		s.ring = append(s.ring, key)
	}
	s.total--
	return n, true
}

// Start delivers queued notices until ctx ends; then the notices still queued are dropped
// (shutdown). It implements controller-runtime's manager.Runnable.
func (s *WebhookSink) Start(ctx context.Context) error {
	for {
		if n, ok := s.next(); ok {
			if ctx.Err() == nil {
				s.deliver(ctx, n)
				continue
			}
			s.drop(n, DropShutdown)
			continue
		}
		select {
		case <-ctx.Done():
			s.mu.Lock()
			s.closed = true
			s.mu.Unlock()
			for {
				n, ok := s.next()
				if !ok {
					return nil
				}
				s.drop(n, DropShutdown)
			}
		case <-s.wake:
		}
	}
}

// deliver sends n, retrying retryable failures with exponential backoff.
func (s *WebhookSink) deliver(ctx context.Context, n DriftNotice) {
	body, err := EncodeDriftEvent(n)
	if err != nil {
		s.drop(n, DropRefused)
		return
	}
	switch reason, named := s.post.Deliver(ctx, body); reason {
	case "":
		s.o.Metrics.Sent.Inc()
	case DropRejected, DropRefused:
		s.drop(n, reason, "refusal", named)
	default:
		s.drop(n, reason)
	}
}

// drop counts and logs a dropped notice; kv adds log keys (the refusal name of a refused one).
func (s *WebhookSink) drop(n DriftNotice, reason string, kv ...any) {
	s.o.Metrics.Dropped.WithLabelValues(reason).Inc()
	if reason == DropQueueFull {
		s.o.Metrics.QueueFull.WithLabelValues(n.Namespace).Inc()
	}
	if s.o.Log != nil {
		s.o.Log("Drift notice dropped", append([]any{"namespace", n.Namespace, "deployment", n.Namespace + "/" + n.Deployment, "candidateSnapshot", n.CandidateSnapshotDigest, "reason", reason}, kv...)...)
	}
}
