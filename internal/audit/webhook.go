package audit

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/b10x/connector-mcp/internal/webhookpost"
)

// NDJSONContentType is the media type of a webhook batch: one record per line, each line what
// the file sink writes.
const NDJSONContentType = "application/x-ndjson"

// Defaults of a [Webhook], after the Kubernetes apiserver audit webhook's batch mode.
const (
	// DefaultWebhookBufferSize bounds the records waiting for delivery.
	DefaultWebhookBufferSize = 10000
	// DefaultWebhookBatchMaxSize bounds the records of one POST.
	DefaultWebhookBatchMaxSize = 400
	// DefaultWebhookBatchMaxWait is how long the first record of a batch waits for more.
	DefaultWebhookBatchMaxWait = time.Second
	// DefaultWebhookMaxAttempts bounds the POSTs of one batch.
	DefaultWebhookMaxAttempts = 6
	// DefaultWebhookMinBackoff and DefaultWebhookMaxBackoff bound the delay between attempts.
	DefaultWebhookMinBackoff = 500 * time.Millisecond
	DefaultWebhookMaxBackoff = 30 * time.Second
	// DefaultWebhookShutdownTimeout bounds the final flush once the process stops.
	DefaultWebhookShutdownTimeout = 10 * time.Second
)

// IsWebhook reports whether sink names a webhook receiver (an http or https URL) rather than
// one of Open's sinks.
func IsWebhook(sink string) bool {
	return strings.HasPrefix(sink, "https://") || strings.HasPrefix(sink, "http://")
}

// WebhookMetrics are the webhook sink's Prometheus counters.
type WebhookMetrics struct {
	// Sent counts records the receiver accepted (2xx).
	Sent prometheus.Counter
	// Dropped counts records given up, by reason (webhookpost.DropReasons).
	Dropped *prometheus.CounterVec
}

// NewWebhookMetrics returns unregistered counters: connector_mcp_audit_webhook_sent_total and
// connector_mcp_audit_webhook_dropped_total{reason}, every reason present from zero.
func NewWebhookMetrics() *WebhookMetrics {
	m := &WebhookMetrics{
		Sent: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "connector_mcp", Name: "audit_webhook_sent_total",
			Help: "Audit records the webhook receiver accepted."}),
		Dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "connector_mcp", Name: "audit_webhook_dropped_total",
			Help: "Audit records the webhook sink gave up, by reason (queue_full, rejected, refused, retries_exhausted, shutdown)."}, []string{"reason"}),
	}
	for _, r := range webhookpost.DropReasons {
		m.Dropped.WithLabelValues(r)
	}
	return m
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

// WebhookOptions configure a [Webhook]. Zero numbers take the defaults.
type WebhookOptions struct {
	// URL is the receiver (webhookpost.CheckURL: no userinfo, query or fragment).
	URL string
	// Client is the egress client bound to URL, built by the binary with k8sbinding.NewClient
	// from webhookpost.Policy (the cluster deny list, IP policy, TLS roots, bounds and bearer
	// file). Required.
	Client *http.Client
	// BufferSize bounds the records waiting for delivery; a record written when it is full is
	// dropped (queue_full).
	BufferSize int
	// BatchMaxSize bounds the records of one POST; BatchMaxWait is how long a batch's first
	// record waits for more.
	BatchMaxSize int
	BatchMaxWait time.Duration
	// MaxAttempts bounds the POSTs of one batch; MinBackoff and MaxBackoff the exponential delay
	// between them.
	MaxAttempts            int
	MinBackoff, MaxBackoff time.Duration
	// ShutdownTimeout bounds the final flush after Start's context ends.
	ShutdownTimeout time.Duration
	// Metrics counts deliveries and drops (nil: NewWebhookMetrics, unregistered).
	Metrics *WebhookMetrics
	// Log reports dropped batches; nil logs nothing. It never receives a record or the bearer.
	Log func(msg string, keysAndValues ...any)
}

// Webhook is the webhook sink of the audit trail: an io.Writer for a [Logger] that queues each
// line (one record) in a bounded buffer without blocking, and a runnable (Start) that POSTs the
// lines in order, in batches of at most BatchMaxSize, as NDJSON, through the binary's egress
// client. A full buffer drops the record and counts it: the hot path never waits on the
// receiver.
type Webhook struct {
	o    WebhookOptions
	post *webhookpost.Poster
	mu   sync.Mutex
	// buf holds the queued lines, oldest first; closed is set once the final flush ended.
	buf    [][]byte
	closed bool
	wake   chan struct{}
}

// NewWebhook checks o and returns the sink; run it with Start. A bad URL or option is
// ErrInvalidSink.
func NewWebhook(o WebhookOptions) (*Webhook, error) {
	if err := webhookpost.CheckURL(o.URL); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidSink, err)
	}
	if o.Client == nil {
		return nil, fmt.Errorf("%w: a webhook sink needs its egress client", ErrInvalidSink)
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.BufferSize, DefaultWebhookBufferSize)
	def(&o.BatchMaxSize, DefaultWebhookBatchMaxSize)
	def(&o.MaxAttempts, DefaultWebhookMaxAttempts)
	defDur(&o.BatchMaxWait, DefaultWebhookBatchMaxWait)
	defDur(&o.MinBackoff, DefaultWebhookMinBackoff)
	defDur(&o.MaxBackoff, DefaultWebhookMaxBackoff)
	defDur(&o.ShutdownTimeout, DefaultWebhookShutdownTimeout)
	if o.BufferSize < 1 || o.BatchMaxSize < 1 || o.MaxAttempts < 1 || o.BatchMaxWait < 0 || o.MinBackoff < 0 ||
		o.MaxBackoff < o.MinBackoff || o.ShutdownTimeout < 0 {
		return nil, fmt.Errorf("%w: webhook sizes and attempts must be positive, backoffs ordered", ErrInvalidSink)
	}
	if o.Metrics == nil {
		o.Metrics = NewWebhookMetrics()
	}
	post := &webhookpost.Poster{Client: o.Client, URL: o.URL, ContentType: NDJSONContentType,
		MaxAttempts: o.MaxAttempts, MinBackoff: o.MinBackoff, MaxBackoff: o.MaxBackoff}
	return &Webhook{o: o, post: post, wake: make(chan struct{}, 1)}, nil
}

// Metrics returns the sink's counters.
func (w *Webhook) Metrics() *WebhookMetrics { return w.o.Metrics }

// Write queues p, one record's line, without blocking on the receiver: a full buffer drops it
// (queue_full), a stopped sink too (shutdown). A drop is counted, not an error: it never fails
// the caller's request.
func (w *Webhook) Write(p []byte) (int, error) {
	line := bytes.Clone(p)
	w.mu.Lock()
	switch {
	case w.closed:
		w.mu.Unlock()
		w.o.Metrics.Dropped.WithLabelValues(webhookpost.DropShutdown).Inc()
		return len(p), nil
	case len(w.buf) >= w.o.BufferSize:
		w.mu.Unlock()
		w.o.Metrics.Dropped.WithLabelValues(webhookpost.DropQueueFull).Inc()
		return len(p), nil
	}
	w.buf = append(w.buf, line)
	// The worker waits for a batch's first record, then for a full batch (or BatchMaxWait).
	n := len(w.buf)
	w.mu.Unlock()
	if n == 1 || n == w.o.BatchMaxSize {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	return len(p), nil
}

// queued returns the number of records waiting.
func (w *Webhook) queued() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.buf)
}

// take pops the oldest BatchMaxSize records at most.
func (w *Webhook) take() [][]byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := min(len(w.buf), w.o.BatchMaxSize)
	batch := w.buf[:n:n]
	w.buf = w.buf[n:]
	if len(w.buf) == 0 {
		w.buf = nil // let the delivered lines go
	}
	return batch
}

// NeedLeaderElection is false: every replica delivers its own records.
func (w *Webhook) NeedLeaderElection() bool { return false }

// Start delivers batches until ctx ends, then flushes what is queued (records written meanwhile
// included) for at most ShutdownTimeout; what is left then is dropped (shutdown). It implements
// controller-runtime's manager.Runnable.
func (w *Webhook) Start(ctx context.Context) error {
	// Deliveries outlive ctx by at most ShutdownTimeout, so the batch in flight and the final
	// flush can finish.
	dctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		t := time.NewTimer(w.o.ShutdownTimeout)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-dctx.Done():
		}
	})
	defer stop()
	for ctx.Err() == nil {
		if !w.waitBatch(ctx) {
			break
		}
		w.deliver(dctx, w.take())
	}
	for dctx.Err() == nil {
		batch := w.take()
		if len(batch) == 0 {
			break
		}
		w.deliver(dctx, batch)
	}
	w.mu.Lock()
	w.closed = true
	left := len(w.buf)
	w.buf = nil
	w.mu.Unlock()
	if left > 0 {
		w.dropped(left, webhookpost.DropShutdown, "")
	}
	return nil
}

// waitBatch waits until a batch is due: BatchMaxSize records queued, or BatchMaxWait since the
// first one. It returns false when ctx ended first.
func (w *Webhook) waitBatch(ctx context.Context) bool {
	for w.queued() == 0 {
		select {
		case <-ctx.Done():
			return false
		case <-w.wake:
		}
	}
	t := time.NewTimer(w.o.BatchMaxWait)
	defer t.Stop()
	for w.queued() < w.o.BatchMaxSize {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		case <-w.wake:
		}
	}
	return true
}

// deliver POSTs one batch, the lines concatenated, and counts the outcome per record.
func (w *Webhook) deliver(ctx context.Context, batch [][]byte) {
	if len(batch) == 0 {
		return
	}
	reason, named := w.post.Deliver(ctx, bytes.Join(batch, nil))
	if reason == "" {
		w.o.Metrics.Sent.Add(float64(len(batch)))
		return
	}
	w.dropped(len(batch), reason, named)
}

// dropped counts and logs n records given up.
func (w *Webhook) dropped(n int, reason, named string) {
	w.o.Metrics.Dropped.WithLabelValues(reason).Add(float64(n))
	if w.o.Log != nil {
		kv := []any{"records", n, "reason", reason}
		if named != "" {
			kv = append(kv, "refusal", named)
		}
		w.o.Log("Audit records dropped", kv...)
	}
}
