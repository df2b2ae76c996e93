package appoptions

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/b10x/connector-mcp/egress"
)

// TestCABundleFile: --ca-bundle-file makes a private-CA server reachable through the egress
// port built from the options (TLS 1.2 floor, verification on); without it the same exchange is
// refused as tls_unknown_authority; an unusable file fails validation naming the flag.
func TestCABundleFile(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(`{}`)) }))
	defer srv.Close()
	dir := t.TempDir()
	good := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(good, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	exchange := func(o TLS) error {
		cfg, err := o.TLSClientConfig()
		if err != nil {
			return err
		}
		tr, err := egress.NewTransport(egress.Policy{Endpoint: srv.URL, IP: egress.IPPolicy{Loopback: egress.LoopbackAllowedUnsafe}, TLSClientConfig: cfg, Timeout: 5 * time.Second})
		if err != nil {
			return err
		}
		defer tr.CloseIdleConnections()
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL+"/", nil)
		_, err = tr.Exchange(context.Background(), req)
		return err
	}
	o := TLS{CABundleFile: good}
	if err := o.Validate(); err != nil {
		t.Fatalf("valid bundle: %v", err)
	}
	if err := exchange(o); err != nil {
		t.Fatalf("with --ca-bundle-file: %v", err)
	}
	if err := exchange(TLS{}); !errors.Is(err, egress.ErrTLSRefused) || !strings.Contains(err.Error(), egress.RefusalTLSUnknownAuthority) {
		t.Fatalf("without it: got %v, want %s", err, egress.RefusalTLSUnknownAuthority)
	}

	bad := filepath.Join(dir, "bad.crt")
	if err := os.WriteFile(bad, []byte("-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{bad, filepath.Join(dir, "absent.crt")} {
		o := TLS{CABundleFile: path}
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--ca-bundle-file") {
			t.Fatalf("%s: got %v, want an error naming --ca-bundle-file", path, err)
		}
	}
}

// TestCABundleReadOnce: Validate reads --ca-bundle-file and TLSClientConfig, in the copies of the
// options made after it too, returns what it read without reading the file again (it still works
// once the file is gone); options not validated, or whose file name changed since, get
// ErrCABundleNotRead instead of a second read.
func TestCABundleReadOnce(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	o := TLS{CABundleFile: file}
	if _, err := o.TLSClientConfig(); !errors.Is(err, ErrCABundleNotRead) {
		t.Fatalf("before Validate: %v, want ErrCABundleNotRead", err)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	copied := o
	for name, opts := range map[string]*TLS{"validated": &o, "a copy": &copied} {
		cfg, err := opts.TLSClientConfig()
		if err != nil || cfg == nil || cfg.RootCAs == nil || cfg.MinVersion != tls.VersionTLS12 {
			t.Fatalf("%s, file removed: %v, %v; want the configuration Validate read", name, cfg, err)
		}
	}
	copied.CABundleFile = file + ".other"
	if _, err := copied.TLSClientConfig(); !errors.Is(err, ErrCABundleNotRead) {
		t.Fatalf("another file name: %v, want ErrCABundleNotRead", err)
	}
	if cfg, err := (&TLS{}).TLSClientConfig(); cfg != nil || err != nil {
		t.Fatalf("no bundle file: %v, %v; want nil (the system roots)", cfg, err)
	}
}
