package oauth

import (
	"bytes"
	"io"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/b10x/connector-mcp/refusal"
	"github.com/b10x/connector-mcp/snapshot"
)

// MaxResponseBytes is the bound this package applies to every metadata, registration and token
// response it reads itself; the [*http.Client] a caller hands over should bound responses to it
// too (egress.Policy.MaxResponseBytes).
const MaxResponseBytes = 1 << 20

// maxOAuthResponse bounds every metadata, registration and token response.
const maxOAuthResponse = MaxResponseBytes

// refusalRecorder remembers the last named refusal of the transport (an egress policy refusal,
// free of secrets and prose) so a failed discovery can say why, although the SDK flattens the
// errors of its metadata fetches.
type refusalRecorder struct {
	mu   sync.Mutex
	last error
	next http.RoundTripper
}

func (r *refusalRecorder) reset() {
	r.mu.Lock()
	r.last = nil
	r.mu.Unlock()
}

// RoundTrip implements [http.RoundTripper].
func (r *refusalRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if named, ok := refusal.As(err); ok {
		r.mu.Lock()
		r.last = named
		r.mu.Unlock()
	}
	return resp, err
}

// wrap returns a copy of c whose transport records refusals.
func (r *refusalRecorder) wrap(c *http.Client) *http.Client {
	r.next = c.Transport
	if r.next == nil {
		r.next = http.DefaultTransport
	}
	cc := *c
	cc.Transport = r
	return &cc
}

// dialRefusal returns the last recorded refusal, or nil.
func (h *Handler) dialRefusal() error {
	h.refusals.mu.Lock()
	defer h.refusals.mu.Unlock()
	return h.refusals.last
}

// registrationCapture observes the SDK's dynamic client registration: the successful response
// to a POST at the registration endpoint is decoded (as the SDK decodes it) so the registration
// can be persisted per issuer. Nothing else is read or changed.
type registrationCapture struct {
	next     http.RoundTripper
	endpoint string

	mu  sync.Mutex
	got *oauthex.ClientRegistrationResponse
}

// wrap returns a copy of c that records registrations at endpoint.
func (r *registrationCapture) wrap(c *http.Client, endpoint string) *http.Client {
	r.next, r.endpoint = c.Transport, endpoint
	if r.next == nil {
		r.next = http.DefaultTransport
	}
	cc := *c
	cc.Transport = r
	return &cc
}

// RoundTrip implements [http.RoundTripper].
func (r *registrationCapture) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err != nil || req.Method != http.MethodPost || req.URL.String() != r.endpoint ||
		(resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK) {
		return resp, err
	}
	body, rerr := io.ReadAll(io.LimitReader(resp.Body, maxOAuthResponse))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	var reg oauthex.ClientRegistrationResponse
	if rerr == nil && snapshot.Unmarshal(body, &reg) == nil && reg.ClientID != "" {
		r.mu.Lock()
		r.got = &reg
		r.mu.Unlock()
	}
	return resp, nil
}

// result returns the captured registration, or nil.
func (r *registrationCapture) result() *oauthex.ClientRegistrationResponse {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got
}
