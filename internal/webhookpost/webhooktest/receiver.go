// Package webhooktest is a real loopback HTTPS webhook receiver for the tests of the webhooks
// that deliver through internal/webhookpost (the drift notices, the audit trail's batches).
package webhooktest

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// Receiver is a loopback HTTPS server answering the statuses in order (the last one repeats),
// recording every request's body and headers and counting the connections it accepts.
type Receiver struct {
	// Server is the running server; its URL is the receiver's.
	Server *httptest.Server
	// Conns counts the connections accepted (a dial egress refused never reaches it).
	Conns atomic.Int64

	mu       sync.Mutex
	statuses []int
	bodies   [][]byte
	headers  []http.Header
	release  chan struct{}
}

// New starts a receiver answering statuses (at least one), closed when t ends.
func New(t testing.TB, statuses ...int) *Receiver {
	t.Helper()
	r := &Receiver{statuses: statuses}
	r.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.bodies = append(r.bodies, b)
		r.headers = append(r.headers, req.Header.Clone())
		st := r.statuses[min(len(r.bodies), len(r.statuses))-1]
		release := r.release
		r.mu.Unlock()
		if release != nil {
			<-release
		}
		w.WriteHeader(st)
	}))
	r.Server.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			r.Conns.Add(1)
		}
	}
	r.Server.StartTLS()
	t.Cleanup(r.Server.Close)
	return r
}

// URL is the receiver's base URL.
func (r *Receiver) URL() string { return r.Server.URL }

// TLSClientConfig trusts the receiver's certificate.
func (r *Receiver) TLSClientConfig() *tls.Config {
	return r.Server.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
}

// Requests is the number of requests received.
func (r *Receiver) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.bodies)
}

// Bodies returns the request bodies received, in order.
func (r *Receiver) Bodies() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.bodies...)
}

// Headers returns the request headers received, in order.
func (r *Receiver) Headers() []http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]http.Header(nil), r.headers...)
}

// Hold makes the requests from now on wait for the answer until the returned release is called
// (once).
func (r *Receiver) Hold() (release func()) {
	ch := make(chan struct{})
	r.mu.Lock()
	r.release = ch
	r.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}
