package app

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/b10x/connector-mcp/egress"
)

// The OAuth producer's client denies the Service CIDRs even where the IP policy would allow the
// address (an McpCredential's issuer is a tenant's choice); the twin without them reaches it.
func TestProducerClientDeniesServiceCIDRs(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer ts.Close()
	ip := egress.IPPolicy{Loopback: egress.LoopbackAllowedUnsafe}
	get := func(cidrs []netip.Prefix) error {
		hc, err := producerHTTPClient(ip, cidrs, nil, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, ts.URL, nil)
		resp, err := hc.Do(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		return err
	}
	if err := get(nil); err != nil {
		t.Fatalf("without Service CIDRs: %v", err)
	}
	if err := get([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}); !errors.Is(err, egress.ErrDestinationRefused) {
		t.Fatalf("a Service CIDR address: got %v, want ErrDestinationRefused", err)
	}
}
