package audit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
	"github.com/b10x/connector-mcp/internal/webhookpost"
	"github.com/b10x/connector-mcp/internal/webhookpost/webhooktest"
)

// receiver is the loopback HTTPS receiver the webhooks' tests share.
type receiver struct{ *webhooktest.Receiver }

func newReceiver(t *testing.T, statuses ...int) receiver {
	return receiver{webhooktest.New(t, statuses...)}
}

const webhookToken = "audit-token-5b1e" //nolint:gosec // a test token sent to a loopback receiver

// client is the egress client the binaries build for the receiver (webhookpost.Policy through
// k8sbinding.NewClient), trusting its certificate, under ip and the deny list deny.
func (r receiver) client(t *testing.T, ip egress.IPPolicy, deny egress.DenySource) *http.Client {
	t.Helper()
	p := filepath.Join(t.TempDir(), "bearer")
	if err := os.WriteFile(p, []byte(webhookToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hc, err := k8sbinding.NewClient(webhookpost.Policy(egress.Policy{IP: ip, TLSClientConfig: r.TLSClientConfig(), Timeout: 5 * time.Second}, r.URL()+"/ingest", p, "audit-webhook"), deny)
	if err != nil {
		t.Fatal(err)
	}
	return hc
}

var loopback = egress.IPPolicy{Loopback: egress.LoopbackAllowedUnsafe}

// newWebhook is a sink for r with short backoffs; mod adjusts the options.
func newWebhook(t *testing.T, r receiver, mod func(*WebhookOptions)) *Webhook {
	t.Helper()
	o := WebhookOptions{URL: r.URL() + "/ingest", Client: r.client(t, loopback, &k8sbinding.APIServerDeny{}),
		BatchMaxWait: 10 * time.Millisecond, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}
	if mod != nil {
		mod(&o)
	}
	w, err := NewWebhook(o)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// start runs w until the test ends (or stop is called) and returns stop, which waits for Start.
func start(t *testing.T, w *Webhook) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = w.Start(ctx); close(done) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// waitFor polls cond until it holds or a generous deadline passes (no timing is asserted).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func sent(w *Webhook) float64 { return testutil.ToFloat64(w.Metrics().Sent) }
func dropped(w *Webhook, reason string) float64 {
	return testutil.ToFloat64(w.Metrics().Dropped.WithLabelValues(reason))
}

// records are n distinct call records with a fixed time.
func records(n int) []Record {
	var rs []Record
	for i := range n {
		rs = append(rs, Record{Time: time.Date(2026, 12, 6, 12, 0, i, 0, time.UTC), Kind: KindCall, RequestID: fmt.Sprintf("req-%03d", i),
			Caller: "system:serviceaccount:team-a:agent", Namespace: "team-a", Name: "weather", Operation: "forecast", Outcome: "ok"})
	}
	return rs
}

// strictRecord decodes one line as a Record, refusing any field Record does not have.
func strictRecord(line []byte) error {
	d := json.NewDecoder(bytes.NewReader(line))
	d.DisallowUnknownFields()
	var r Record
	return d.Decode(&r)
}

// The records reach the receiver in order, in NDJSON batches of at most BatchMaxSize, with the
// bearer from the file; each line is byte for byte what the file sink writes, and carries
// nothing but Record's fields (the hygiene is by construction: the sink only ever sees a
// marshalled Record).
func TestWebhookDeliversNDJSONBatchesInOrder(t *testing.T) {
	r := newReceiver(t, http.StatusOK)
	w := newWebhook(t, r, func(o *WebhookOptions) { o.BatchMaxSize = 3 })
	start(t, w)
	l := New(w)
	var file bytes.Buffer
	want := New(&file)
	for _, rec := range records(8) {
		if err := l.Write(rec); err != nil {
			t.Fatal(err)
		}
		if err := want.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "8 records sent", func() bool { return sent(w) == 8 })
	headers := r.Headers()
	var got []byte
	for i, b := range r.Bodies() {
		h := headers[i]
		if h.Get("Content-Type") != NDJSONContentType || h.Get("Authorization") != "Bearer "+webhookToken {
			t.Errorf("batch %d: Content-Type %q, Authorization %q", i, h.Get("Content-Type"), h.Get("Authorization"))
		}
		if n := bytes.Count(b, []byte("\n")); n < 1 || n > 3 || !bytes.HasSuffix(b, []byte("\n")) {
			t.Errorf("batch %d has %d lines: %q", i, n, b)
		}
		if bytes.Contains(b, []byte(webhookToken)) {
			t.Errorf("batch %d carries the bearer", i)
		}
		got = append(got, b...)
	}
	if !bytes.Equal(got, file.Bytes()) {
		t.Fatalf("received\n%s\nthe file sink wrote\n%s", got, file.Bytes())
	}
	sc := bufio.NewScanner(bytes.NewReader(got))
	for sc.Scan() {
		if err := strictRecord(sc.Bytes()); err != nil {
			t.Errorf("line %s: %v", sc.Bytes(), err)
		}
	}
	// Must-fail twin of the field check: a line with a field Record lacks is caught.
	if err := strictRecord([]byte(`{"v":1,"kind":"call","outcome":"ok","arguments":{"q":"x"}}`)); err == nil {
		t.Fatal("a line with an argument field passed the field check: it proves nothing")
	}
}

// A full buffer drops the record and counts it (queue_full); Write returns at once, the sink not
// even running, so the hot path never waits on the receiver. What was queued is sent once the
// sink runs.
func TestWebhookFullBufferDropsWithoutBlocking(t *testing.T) {
	r := newReceiver(t, http.StatusOK)
	w := newWebhook(t, r, func(o *WebhookOptions) { o.BufferSize = 5 })
	l := New(w)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, rec := range records(8) {
			_ = l.Write(rec)
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Write blocked on a full buffer")
	}
	if got := dropped(w, webhookpost.DropQueueFull); got != 3 {
		t.Fatalf("queue_full drops = %v, want 3", got)
	}
	start(t, w)
	waitFor(t, "the 5 queued records sent", func() bool { return sent(w) == 5 })
	if r.Requests() != 1 {
		t.Errorf("%d requests, want one batch", r.Requests())
	}
}

// Retryable answers (5xx, 429, 408) are retried with backoff until the receiver accepts the
// batch; the batch after it waits, so order holds.
func TestWebhookRetriesThenDelivers(t *testing.T) {
	r := newReceiver(t, http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusRequestTimeout, http.StatusOK)
	w := newWebhook(t, r, nil)
	start(t, w)
	if err := New(w).Write(records(1)[0]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the record sent", func() bool { return sent(w) == 1 })
	if n := r.Requests(); n != 4 {
		t.Fatalf("%d requests, want 3 failures then one success", n)
	}
	for _, reason := range webhookpost.DropReasons {
		if got := dropped(w, reason); got != 0 {
			t.Errorf("%s drops = %v", reason, got)
		}
	}
}

// A 400 drops the batch at once as rejected (each record counted); an always-failing receiver
// exhausts the attempts (retries_exhausted).
func TestWebhookDrops(t *testing.T) {
	for _, tc := range []struct {
		status   int
		reason   string
		requests int
	}{
		{http.StatusBadRequest, webhookpost.DropRejected, 1},
		{http.StatusInternalServerError, webhookpost.DropRetriesExhausted, 3},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			r := newReceiver(t, tc.status)
			w := newWebhook(t, r, func(o *WebhookOptions) { o.MaxAttempts = 3; o.BatchMaxSize = 2 })
			l := New(w)
			for _, rec := range records(2) {
				_ = l.Write(rec)
			}
			start(t, w)
			waitFor(t, "the batch dropped", func() bool { return dropped(w, tc.reason) == 2 })
			if n := r.Requests(); n != tc.requests || sent(w) != 0 {
				t.Fatalf("%d requests (want %d), %v sent", n, tc.requests, sent(w))
			}
		})
	}
}

// A receiver the IP policy or the cluster deny list refuses is never connected to: the batch is
// dropped as refused, without retries.
func TestWebhookRefusedDestination(t *testing.T) {
	for name, client := range map[string]func(r receiver) *http.Client{
		"loopback outside development": func(r receiver) *http.Client { return r.client(t, egress.IPPolicy{}, &k8sbinding.APIServerDeny{}) },
		"cluster deny list": func(r receiver) *http.Client {
			return r.client(t, loopback, &k8sbinding.APIServerDeny{Static: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
		},
	} {
		t.Run(name, func(t *testing.T) {
			r := newReceiver(t, http.StatusOK)
			var logged atomic.Value
			w := newWebhook(t, r, func(o *WebhookOptions) {
				o.Client = client(r)
				o.Log = func(_ string, kv ...any) { logged.Store(fmt.Sprint(kv...)) }
			})
			start(t, w)
			_ = New(w).Write(records(1)[0])
			waitFor(t, "the record dropped", func() bool { return dropped(w, webhookpost.DropRefused) == 1 })
			if r.Conns.Load() != 0 || dropped(w, webhookpost.DropRetriesExhausted) != 0 {
				t.Fatalf("%d connections reached the receiver", r.Conns.Load())
			}
			if s, _ := logged.Load().(string); !strings.Contains(s, egress.RefusalDestination) {
				t.Errorf("log %q does not name the refusal %s", s, egress.RefusalDestination)
			}
		})
	}
}

// On shutdown the queued records are flushed (the batch wait is not waited out); with a receiver
// that never accepts, the flush gives up after ShutdownTimeout and counts the rest as shutdown
// drops; a record written after the sink stopped is one too.
func TestWebhookShutdown(t *testing.T) {
	t.Run("flushes", func(t *testing.T) {
		r := newReceiver(t, http.StatusOK)
		w := newWebhook(t, r, func(o *WebhookOptions) { o.BatchMaxWait = time.Hour })
		stop := start(t, w)
		l := New(w)
		for _, rec := range records(5) {
			_ = l.Write(rec)
		}
		stop()
		if sent(w) != 5 || r.Requests() != 1 {
			t.Fatalf("sent %v in %d requests, want 5 in one", sent(w), r.Requests())
		}
		_ = l.Write(records(1)[0])
		if got := dropped(w, webhookpost.DropShutdown); got != 1 {
			t.Fatalf("a write after shutdown: %v shutdown drops, want 1", got)
		}
	})
	t.Run("bounded", func(t *testing.T) {
		r := newReceiver(t, http.StatusServiceUnavailable)
		w := newWebhook(t, r, func(o *WebhookOptions) {
			o.BatchMaxWait, o.BatchMaxSize, o.MaxAttempts = time.Hour, 2, 1000
			o.ShutdownTimeout = 50 * time.Millisecond
		})
		stop := start(t, w)
		l := New(w)
		for _, rec := range records(5) {
			_ = l.Write(rec)
		}
		stop()
		if got := dropped(w, webhookpost.DropShutdown); got != 5 || sent(w) != 0 {
			t.Fatalf("shutdown drops %v (want 5), sent %v", got, sent(w))
		}
	})
}

// NewWebhook refuses a URL with a token in it and options out of range, by ErrInvalidSink.
func TestNewWebhookRefusals(t *testing.T) {
	hc := &http.Client{}
	for _, o := range []WebhookOptions{
		{URL: "https://audit.example.com/ingest?token=x", Client: hc},
		{URL: "https://user:pw@audit.example.com/ingest", Client: hc}, //nolint:gosec // the refused userinfo case
		{URL: "/ingest", Client: hc},
		{URL: "https://audit.example.com/ingest"},
		{URL: "https://audit.example.com/ingest", Client: hc, BatchMaxSize: -1},
	} {
		if _, err := NewWebhook(o); !errors.Is(err, ErrInvalidSink) {
			t.Errorf("NewWebhook(%s) = %v, want ErrInvalidSink", o.URL, err)
		}
	}
}
