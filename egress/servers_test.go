package egress

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// serveOn starts h on a loopback address (e.g. "127.0.0.5").
func serveOn(t *testing.T, host string, h http.Handler) *httptest.Server {
	t.Helper()
	ln := listenTCP(t, host)
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// inClusterIP is the test stand-in for an in-cluster service range: loopback treated as
// private and reachable only through the explicit allow-list (127.0.0.5 and 127.0.0.7).
func inClusterIP() IPPolicy {
	return IPPolicy{
		Loopback: LoopbackByCIDRUnsafe,
		AllowCIDRs: []netip.Prefix{
			netip.MustParsePrefix("127.0.0.5/32"),
			netip.MustParsePrefix("127.0.0.7/32"),
		},
	}
}

func inCluster(endpoint string) Policy {
	return Policy{Endpoint: endpoint, IP: inClusterIP(), Timeout: 5 * time.Second}
}

// seen is what a test server observed of one request.
type seen struct {
	method, path, auth, accept string
}

// recorder wraps a handler and records every request it receives.
type recorder struct {
	mu   sync.Mutex
	reqs []seen
}

func (r *recorder) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.reqs = append(r.reqs, seen{req.Method, req.URL.Path, req.Header.Get("Authorization"), req.Header.Get("Accept")})
		r.mu.Unlock()
		h.ServeHTTP(w, req)
	})
}

func (r *recorder) all() []seen {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]seen(nil), r.reqs...)
}

func (r *recorder) count(method string) int {
	n := 0
	for _, s := range r.all() {
		if method == "" || s.method == method {
			n++
		}
	}
	return n
}

func newTransport(t *testing.T, p Policy) *Transport {
	t.Helper()
	tr, err := NewTransport(p)
	if err != nil {
		t.Fatalf("NewTransport: %v", err)
	}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

func post(t *testing.T, url, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return req
}

func get(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// listenTCP listens on host (a loopback address) at an ephemeral port.
func listenTCP(t *testing.T, host string) net.Listener {
	t.Helper()
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatalf("listen on %s: %v", host, err)
	}
	return ln
}

// call sends one request with c, reads and closes the body, and returns the status and error.
func call(c *http.Client, method, url, body string) (int, error) {
	req, err := http.NewRequestWithContext(context.Background(), method, url, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

// refusalOf returns the Refusal name of err, or "" when err is not a named refusal.
func refusalOf(err error) string {
	if err == nil {
		return ""
	}
	return refusalName(err)
}

// serveOnB starts h on 127.0.0.1 for a benchmark and returns its base URL.
func serveOnB(b *testing.B, h http.Handler) string {
	srv := httptest.NewServer(h)
	b.Cleanup(srv.Close)
	return srv.URL
}
