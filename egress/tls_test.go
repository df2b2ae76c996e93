package egress

import (
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"testing"
)

// tlsServer is an httptest TLS server on 127.0.0.1 with the pool that trusts it.
type tlsServer struct {
	*httptest.Server
	certPool *x509.CertPool
}

func serveTLS(t *testing.T, h http.Handler) *tlsServer {
	t.Helper()
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	return &tlsServer{Server: srv, certPool: pool}
}
