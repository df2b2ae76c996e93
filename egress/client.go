package egress

import (
	"net/http"
)

// NewHTTPClient returns a guarded, streaming [http.Client] for p: the same scheme rule,
// binding (when p.Endpoint is set), dial-time IP policy, redirect policy, header bound,
// deadline and bearer as [Transport], but response bodies are streamed through the
// MaxResponseBytes bound (a read past it fails with a [*TooLargeError]) and request bodies are
// streamed through MaxRequestBytes. The deadline covers reading the body. Use it for the OCI
// registry client (several hosts, redirects to blob storage re-checked at dial time) and OAuth
// discovery. Like [Transport.RoundTrip], it declines a GET for text/event-stream locally.
func NewHTTPClient(p Policy) (*http.Client, error) {
	t, err := NewTransport(p)
	if err != nil {
		return nil, err
	}
	return &http.Client{
		Transport:     &streamingTransport{t: t},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, nil
}

// streamingTransport is the RoundTripper of [NewHTTPClient].
type streamingTransport struct{ t *Transport }

// RoundTrip sends req through the port and returns a response whose body is bounded.
func (s *streamingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if resp := declineStream(req); resp != nil {
		return resp, nil
	}
	resp, cancel, err := s.t.send(req.Context(), req, false)
	if err != nil {
		return nil, err
	}
	limit := s.t.p.MaxResponseBytes
	if resp.ContentLength > limit {
		resp.Body.Close()
		cancel()
		return nil, &TooLargeError{Kind: LimitResponse, Limit: limit}
	}
	resp.Body = &boundedReader{
		rc: resp.Body, limit: limit, kind: LimitResponse,
		ctx: resp.Request.Context(), timeout: s.t.p.Timeout, cancel: cancel,
	}
	// Hand back the caller's request, never the assembled one (it carries the bearer).
	resp.Request = req
	return resp, nil
}

// CloseIdleConnections closes idle pooled connections.
func (s *streamingTransport) CloseIdleConnections() { s.t.CloseIdleConnections() }
