package gatewayapp

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeCert writes a fresh self-signed loopback certificate named cn to certFile/keyFile.
func writeCert(t *testing.T, certFile, keyFile, cn string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	// Key first, then certificate: the watcher reloads on the certificate's event.
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// servedCN dials addr and returns the common name of the certificate served.
func servedCN(t *testing.T, addr string) string {
	t.Helper()
	d := &tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}} //nolint:gosec // the test reads the served certificate
	conn, err := d.DialContext(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	return conn.(*tls.Conn).ConnectionState().PeerCertificates[0].Subject.CommonName
}

// TestServingCertificateRotates: a certificate rotated on disk is served to new connections on
// loopback without restarting the listener.
func TestServingCertificateRotates(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writeCert(t, certFile, keyFile, "first")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	getCert, err := watchedCertificate(ctx, certFile, keyFile, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{GetCertificate: getCert, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _ = c.(*tls.Conn).HandshakeContext(context.Background()); _ = c.Close() }()
		}
	}()
	if cn := servedCN(t, ln.Addr().String()); cn != "first" {
		t.Fatalf("served %q, want first", cn)
	}
	writeCert(t, certFile, keyFile, "second")
	deadline := time.Now().Add(10 * time.Second)
	for {
		cn := servedCN(t, ln.Addr().String())
		if cn == "second" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still serving %q after rotation, want second", cn)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestServingCertificateMissing keeps the error text of an unreadable certificate.
func TestServingCertificateMissing(t *testing.T) {
	_, err := watchedCertificate(context.Background(), "/nonexistent/tls.crt", "/nonexistent/tls.key", 0)
	if err == nil || !strings.HasPrefix(err.Error(), "gateway: serving certificate: ") {
		t.Fatalf("err = %v", err)
	}
}
