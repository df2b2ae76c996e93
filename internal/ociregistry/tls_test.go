package ociregistry

import (
	"context"
	"crypto/tls"
	"errors"
	"testing"
	"time"

	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/ocitest"
)

// TestRegistryPrivateCA: a registry behind a private CA is pushed to and pulled from through the
// egress-guarded client given its roots (as the manager's --ca-bundle-file does); the twin
// without them is refused tls_unknown_authority inside a RegistryError, and nothing is pulled.
func TestRegistryPrivateCA(t *testing.T) {
	reg := ocitest.New(ocitest.Options{Referrers: true, TLS: true})
	defer reg.Close()
	client := func(roots *tls.Config) *Client {
		hc, err := egress.NewHTTPClient(egress.Policy{IP: egress.IPPolicy{Loopback: egress.LoopbackAllowedUnsafe}, TLSClientConfig: roots, Timeout: 10 * time.Second, MaxRedirects: 3})
		if err != nil {
			t.Fatal(err)
		}
		return &Client{HTTPClient: hc}
	}
	repo, err := ParseRepository(reg.Host + "/team/acme")
	if err != nil {
		t.Fatal(err)
	}
	trusted := client(&tls.Config{RootCAs: reg.CertPool()})
	ref, err := trusted.Push(context.Background(), repo, profiles(t, 1))
	if err != nil {
		t.Fatalf("push with the registry's CA: %v", err)
	}
	if _, err := trusted.Pull(context.Background(), ref); err != nil {
		t.Fatalf("pull with the registry's CA: %v", err)
	}

	before := reg.Requests()
	pack, err := client(nil).Pull(context.Background(), ref)
	var te *egress.TLSError
	var re *RegistryError
	if pack != nil || !errors.As(err, &te) || te.Refusal() != egress.RefusalTLSUnknownAuthority || !errors.As(err, &re) {
		t.Fatalf("pull without the CA: got %v, want a RegistryError carrying %s", err, egress.RefusalTLSUnknownAuthority)
	}
	if reg.Requests() != before {
		t.Fatalf("the registry served %d requests without a verified handshake", reg.Requests()-before)
	}
}
