package review

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/egress"
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
	DefaultWebhookQueue       = 256
	DefaultWebhookMaxAttempts = 6
	DefaultWebhookMinBackoff  = time.Second
	DefaultWebhookMaxBackoff  = time.Minute
)

// Reasons a notice is dropped (the "reason" label of connector_mcp_drift_webhook_dropped_total).
const (
	// DropQueueFull: the bounded queue was full when the notice was offered.
	DropQueueFull = "queue_full"
	// DropRejected: the receiver answered a 4xx status other than 408 and 429 (not retried).
	DropRejected = "rejected"
	// DropRefused: egress refused the exchange (address, scheme, bounds); not retried.
	DropRefused = "refused"
	// DropRetriesExhausted: every attempt failed with a retryable error (5xx, 408, 429, network).
	DropRetriesExhausted = "retries_exhausted"
	// DropShutdown: the manager stopped with the notice still queued.
	DropShutdown = "shutdown"
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
}

// NewWebhookMetrics returns unregistered counters: connector_mcp_drift_webhook_sent_total and
// connector_mcp_drift_webhook_dropped_total{reason}.
func NewWebhookMetrics() *WebhookMetrics {
	return &WebhookMetrics{
		Sent: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "connector_mcp", Name: "drift_webhook_sent_total",
			Help: "Drift notices the webhook receiver accepted."}),
		Dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "connector_mcp", Name: "drift_webhook_dropped_total",
			Help: "Drift notices given up, by reason (queue_full, rejected, refused, retries_exhausted, shutdown)."}, []string{"reason"}),
	}
}

// Register registers the counters with reg.
func (m *WebhookMetrics) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.Sent, m.Dropped} {
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
	// the one live freezes use. Its Endpoint, Credential and Secrets are replaced.
	Egress egress.Policy
	// BearerFile, when set, is read for every delivery and sent as "Authorization: Bearer".
	BearerFile string
	// Queue bounds the notices waiting for delivery (default DefaultWebhookQueue).
	Queue int
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
// blocks: notices wait in a bounded queue and a full queue drops (counted). One worker, run by
// Start, delivers them in order with retries and exponential backoff.
type WebhookSink struct {
	o      WebhookOptions
	port   *egress.Transport
	queue  chan DriftNotice
	mu     sync.Mutex
	closed bool
}

// NewWebhookSink checks o and builds the exchange port, bound to the receiver's scheme, host
// and port. A bad URL or option is ErrInvalidWebhook; a bad egress policy wraps
// egress.ErrInvalidPolicy.
func NewWebhookSink(o WebhookOptions) (*WebhookSink, error) {
	u, err := url.Parse(o.URL)
	if err != nil || !u.IsAbs() || u.Host == "" {
		return nil, fmt.Errorf("%w: the URL is not absolute", ErrInvalidWebhook)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%w: the URL must not carry userinfo, a query or a fragment (put a token in the bearer file)", ErrInvalidWebhook)
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
	if o.Queue < 1 || o.MaxAttempts < 1 || o.MinBackoff < 0 || o.MaxBackoff < o.MinBackoff {
		return nil, fmt.Errorf("%w: queue and attempts must be positive, backoffs ordered", ErrInvalidWebhook)
	}
	if o.Metrics == nil {
		o.Metrics = NewWebhookMetrics()
	}
	p := o.Egress
	p.Endpoint = o.URL
	p.Credential, p.Secrets = nil, nil
	if o.BearerFile != "" {
		p.Credential = &egress.CredentialRef{Name: "drift-webhook", Key: "bearer"}
		p.Secrets = egress.SecretStoreFunc(func(context.Context, egress.CredentialRef) ([]byte, error) {
			return readBearerFile(o.BearerFile)
		})
	}
	port, err := egress.NewTransport(p)
	if err != nil {
		return nil, err
	}
	return &WebhookSink{o: o, port: port, queue: make(chan DriftNotice, o.Queue)}, nil
}

// Metrics returns the sink's counters.
func (s *WebhookSink) Metrics() *WebhookMetrics { return s.o.Metrics }

// Notify offers n for delivery without blocking; a full queue or a stopped sink drops it
// (counted as queue_full or shutdown).
func (s *WebhookSink) Notify(n DriftNotice) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		s.drop(n, DropShutdown)
		return
	}
	select {
	case s.queue <- n:
	default:
		s.drop(n, DropQueueFull)
	}
}

// Start delivers queued notices until ctx ends; then the notices still queued are dropped
// (shutdown). It implements controller-runtime's manager.Runnable.
func (s *WebhookSink) Start(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			s.mu.Lock()
			s.closed = true
			s.mu.Unlock()
			for {
				select {
				case n := <-s.queue:
					s.drop(n, DropShutdown)
				default:
					return nil
				}
			}
		case n := <-s.queue:
			s.deliver(ctx, n)
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
	backoff := s.o.MinBackoff
	for attempt := 1; ; attempt++ {
		retry, reason := s.send(ctx, body)
		if reason == "" {
			s.o.Metrics.Sent.Inc()
			return
		}
		if !retry {
			s.drop(n, reason)
			return
		}
		if attempt >= s.o.MaxAttempts {
			s.drop(n, DropRetriesExhausted)
			return
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			s.drop(n, DropShutdown)
			return
		case <-t.C:
		}
		backoff = min(2*backoff, s.o.MaxBackoff)
	}
}

// send makes one exchange. It returns "" on success, else the drop reason and whether the
// failure is retryable.
func (s *WebhookSink) send(ctx context.Context, body []byte) (retry bool, reason string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.o.URL, bytes.NewReader(body))
	if err != nil {
		return false, DropRefused
	}
	req.Header.Set("Content-Type", CloudEventsContentType)
	resp, err := s.port.Exchange(ctx, req)
	if err != nil {
		var refusal interface{ Refusal() string }
		if errors.As(err, &refusal) && !errors.Is(err, egress.ErrDeadlineExceeded) {
			return false, DropRefused
		}
		return true, DropRetriesExhausted
	}
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return false, ""
	case resp.StatusCode == http.StatusRequestTimeout, resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode >= 500:
		return true, DropRetriesExhausted
	default:
		return false, DropRejected
	}
}

func (s *WebhookSink) drop(n DriftNotice, reason string) {
	s.o.Metrics.Dropped.WithLabelValues(reason).Inc()
	if s.o.Log != nil {
		s.o.Log("Drift notice dropped", "deployment", n.Namespace+"/"+n.Deployment, "candidateSnapshot", n.CandidateSnapshotDigest, "reason", reason)
	}
}

// maxBearerBytes bounds the bearer file.
const maxBearerBytes = 16 << 10

// readBearerFile reads the bearer for one delivery: trimmed, non-empty, bounded, one line.
// Errors name the problem, never the content.
func readBearerFile(path string) ([]byte, error) {
	ref := egress.CredentialRef{Name: "drift-webhook", Key: "bearer"}
	b, err := readFileBounded(path, maxBearerBytes)
	if err != nil {
		return nil, &egress.CredentialError{Ref: ref, Reason: "bearer file unreadable or too large"}
	}
	t := strings.TrimSpace(string(b))
	if t == "" || strings.ContainsAny(t, "\r\n") {
		return nil, &egress.CredentialError{Ref: ref, Reason: "bearer file empty or not one line"}
	}
	return []byte(t), nil
}

// readFileBounded reads at most limit bytes of path; a longer file is an error.
func readFileBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path) //nolint:gosec // an operator-given path
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, errors.New("file too large")
	}
	return b, nil
}
