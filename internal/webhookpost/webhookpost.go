// Package webhookpost is the delivery half of connector-mcp's outbound webhooks (the drift
// notices of internal/review and the audit trail's batches of internal/audit): the receiver URL's
// rules, the egress policy of its client (a bearer read from a file for every exchange), and one
// POST with retries and exponential backoff, classified into the drop reasons the webhooks'
// counters share. It builds no client itself: the binaries pass the policy of Policy to
// k8sbinding.NewClient, which adds the cluster deny list.
package webhookpost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/refusal"
)

// Reasons a payload is given up: the closed "reason" label set of every webhook's dropped
// counter.
const (
	// DropQueueFull: the sink's bounded queue was full when the payload was offered.
	DropQueueFull = "queue_full"
	// DropRejected: the receiver answered a 4xx status other than 408 and 429 (not retried).
	DropRejected = "rejected"
	// DropRefused: egress refused the exchange (address, scheme, bounds, credential); not
	// retried.
	DropRefused = "refused"
	// DropRetriesExhausted: every attempt failed with a retryable error (5xx, 408, 429, network).
	DropRetriesExhausted = "retries_exhausted"
	// DropShutdown: the process stopped with the payload still queued or being retried.
	DropShutdown = "shutdown"
)

// DropReasons is the closed set of drop reasons, in a stable order.
var DropReasons = []string{DropQueueFull, DropRejected, DropRefused, DropRetriesExhausted, DropShutdown}

// CheckURL checks a receiver URL: absolute, with a host, without userinfo, a query or a fragment
// (a token goes in the bearer file). The scheme is judged by egress (https; plain http only when
// the IP policy allows loopback). The errors name the problem, never the URL.
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" {
		return errors.New("the URL is not absolute")
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return errors.New("the URL must not carry userinfo, a query or a fragment (put a token in the bearer file)")
	}
	return nil
}

// MaxResponseBytes is the default bound of what is read of a receiver's answer (then discarded).
const MaxResponseBytes = 64 << 10

// Policy returns base bound to the receiver receiverURL: its Endpoint, and, when bearerFile is
// set, a Credential named name read from that file for every exchange (ReadBearerFile); a zero
// MaxResponseBytes becomes MaxResponseBytes. Pass it to k8sbinding.NewClient with the cluster
// deny list.
func Policy(base egress.Policy, receiverURL, bearerFile, name string) egress.Policy {
	p := base
	p.Endpoint = receiverURL
	p.Credential, p.Secrets = nil, nil
	if bearerFile != "" {
		ref := egress.CredentialRef{Name: name, Key: "bearer"}
		p.Credential = &ref
		p.Secrets = egress.SecretStoreFunc(func(context.Context, egress.CredentialRef) ([]byte, error) {
			return ReadBearerFile(bearerFile, ref)
		})
	}
	if p.MaxResponseBytes == 0 {
		p.MaxResponseBytes = MaxResponseBytes
	}
	return p
}

// MaxBearerBytes bounds a bearer file.
const MaxBearerBytes = 16 << 10

// ReadBearerFile reads the bearer of one exchange from path: trimmed, non-empty, bounded, one
// line. Errors are egress.CredentialErrors of ref naming the problem, never the content.
func ReadBearerFile(path string, ref egress.CredentialRef) ([]byte, error) {
	b, err := ReadFileBounded(path, MaxBearerBytes)
	if err != nil {
		return nil, &egress.CredentialError{Ref: ref, Reason: "bearer file unreadable or too large"}
	}
	t := strings.TrimSpace(string(b))
	if t == "" || strings.ContainsAny(t, "\r\n") {
		return nil, &egress.CredentialError{Ref: ref, Reason: "bearer file empty or not one line"}
	}
	return []byte(t), nil
}

// ReadFileBounded reads at most limit bytes of path; a longer file is an error.
func ReadFileBounded(path string, limit int64) ([]byte, error) {
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
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return b, nil
}

// Poster POSTs payloads to one receiver through Client (built by k8sbinding.NewClient from
// Policy), retrying retryable failures.
type Poster struct {
	// Client is the egress client bound to URL.
	Client *http.Client
	// URL is the receiver; ContentType the payloads' media type.
	URL, ContentType string
	// MaxAttempts bounds the exchanges of one payload (at least 1).
	MaxAttempts int
	// MinBackoff and MaxBackoff bound the exponential delay between attempts.
	MinBackoff, MaxBackoff time.Duration
}

// Deliver POSTs body until the receiver accepts it (2xx: reason ""), a failure is not retryable
// (DropRejected, DropRefused with the refusal's name), MaxAttempts are spent
// (DropRetriesExhausted) or ctx ends during a backoff (DropShutdown).
func (p *Poster) Deliver(ctx context.Context, body []byte) (reason, refusalName string) {
	backoff := p.MinBackoff
	for attempt := 1; ; attempt++ {
		retry, reason, named := p.Send(ctx, body)
		if reason == "" || !retry {
			return reason, named
		}
		if attempt >= p.MaxAttempts {
			return DropRetriesExhausted, ""
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return DropShutdown, ""
		case <-t.C:
		}
		backoff = min(2*backoff, p.MaxBackoff)
	}
}

// Send makes one exchange. It returns "" on success, else the drop reason, whether the failure
// is retryable and, for an egress refusal, its name (e.g. destination_refused).
func (p *Poster) Send(ctx context.Context, body []byte) (retry bool, reason, refusalName string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL, bytes.NewReader(body))
	if err != nil {
		return false, DropRefused, ""
	}
	req.Header.Set("Content-Type", p.ContentType)
	resp, err := p.Client.Do(req)
	if err != nil {
		if name := refusal.Name(err); name != "" && !errors.Is(err, egress.ErrDeadlineExceeded) {
			return false, DropRefused, name
		}
		return true, DropRetriesExhausted, ""
	}
	// The answer is read (bounded by the client) and discarded, so the connection is reused.
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return false, "", ""
	case resp.StatusCode == http.StatusRequestTimeout, resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode >= 500:
		return true, DropRetriesExhausted, ""
	default:
		return false, DropRejected, ""
	}
}
