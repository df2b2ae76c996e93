package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// serveH2 starts an HTTP/2 TLS server on 127.0.0.1.
func serveH2(t *testing.T, h http.Handler) *tlsServer {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	return &tlsServer{Server: srv, certPool: pool}
}

// TestHTTP1OnlyBounds: the port speaks HTTP/1.1 even to a server offering HTTP/2, so the
// header and body bounds stay exact (HTTP/2 reports a header flood only as PROTOCOL_ERROR).
func TestHTTP1OnlyBounds(t *testing.T) {
	var proto string
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		proto = r.Proto
		_, _ = io.WriteString(w, `{}`)
	})
	mux.HandleFunc("/flood", func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i < 5000; i++ {
			w.Header().Add(fmt.Sprintf("X-Flood-%d", i), strings.Repeat("v", 100))
		}
		w.WriteHeader(200)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, strings.Repeat("b", 2<<20))
	})
	srv := serveH2(t, mux)
	p := Policy{Endpoint: srv.URL, IP: IPPolicy{Loopback: LoopbackAllowedUnsafe}, MaxResponseBytes: 1 << 20,
		TLSClientConfig: &tls.Config{RootCAs: srv.certPool}}
	tr := newTransport(t, p)
	if _, err := tr.Exchange(context.Background(), get(t, srv.URL+"/ok")); err != nil {
		t.Fatal(err)
	}
	if proto != "HTTP/1.1" {
		t.Fatalf("negotiated %q, want HTTP/1.1", proto)
	}
	// The server does offer HTTP/2: a default client negotiates it.
	resp, err := srv.Client().Do(get(t, srv.URL+"/ok"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Proto != "HTTP/2.0" {
		t.Fatalf("server does not offer HTTP/2 (%s); this test needs it to", resp.Proto)
	}
	_, err = tr.Exchange(context.Background(), get(t, srv.URL+"/flood"))
	if !errors.Is(err, ErrHeaderTooLarge) {
		t.Fatalf("header flood: got %v, want header_too_large", err)
	}
	if _, err := tr.Exchange(context.Background(), get(t, srv.URL+"/big")); !errors.Is(err, ErrResponseTooLarge) {
		t.Fatalf("big body: got %v, want response_too_large", err)
	}
}
