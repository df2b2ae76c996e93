package egress

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"
)

// TestBindingTransport pins what a binding adds to the base policy: its allow-list widens the
// base's (127.0.0.6 is reachable only through the binding's entry), the port stays bound to the
// binding's URL, and its bearer is fetched per exchange from its store.
func TestBindingTransport(t *testing.T) {
	var rec recorder
	srv := serveOn(t, "127.0.0.6", rec.wrap(jsonHandler(`{}`)))
	base := Policy{IP: IPPolicy{Loopback: LoopbackByCIDRUnsafe, AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.5/32")}}, Timeout: 5 * time.Second}
	store := SecretStoreFunc(func(context.Context, CredentialRef) ([]byte, error) { return []byte("binding-token"), nil })

	tr, err := NewBindingTransport(base, Binding{URL: srv.URL + "/mcp", AllowCIDRs: []string{"127.0.0.6"}, Credential: &CredentialRef{Name: "s", Key: "k"}, Secrets: store})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Exchange(context.Background(), post(t, srv.URL+"/mcp", `{}`)); err != nil {
		t.Fatalf("exchange through the binding: %v", err)
	}
	if got := rec.all(); len(got) != 1 || got[0].auth != "Bearer binding-token" {
		t.Fatalf("server saw %+v", got)
	}
	if len(base.IP.AllowCIDRs) != 1 {
		t.Fatal("the binding changed the base policy's allow-list")
	}

	// Twin: without the binding's allow-list entry the same endpoint is refused at dial time,
	// and nothing reaches the server.
	tr, err = NewBindingTransport(base, Binding{URL: srv.URL + "/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Exchange(context.Background(), post(t, srv.URL+"/mcp", `{}`)); !errors.Is(err, ErrDestinationRefused) {
		t.Fatalf("without the allow-list entry: got %v, want ErrDestinationRefused", err)
	}
	if len(rec.all()) != 1 {
		t.Fatal("a refused exchange reached the server")
	}

	// The port stays bound to the binding's URL.
	other := serveOn(t, "127.0.0.5", rec.wrap(jsonHandler(`{}`)))
	tr, err = NewBindingTransport(base, Binding{URL: srv.URL + "/mcp", AllowCIDRs: []string{"127.0.0.6"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Exchange(context.Background(), post(t, other.URL+"/mcp", `{}`)); !errors.Is(err, ErrDestinationRefused) {
		t.Fatalf("exchange to another host: got %v, want ErrDestinationRefused", err)
	}

	// Bad bindings are invalid policies.
	if _, err := NewBindingTransport(base, Binding{URL: srv.URL, AllowCIDRs: []string{"not-a-cidr"}}); !errors.Is(err, ErrInvalidPolicy) {
		t.Fatalf("bad allow-list entry: got %v", err)
	}
	if _, err := NewBindingTransport(base, Binding{URL: srv.URL, Credential: &CredentialRef{Name: "s", Key: "k"}}); !errors.Is(err, ErrInvalidPolicy) {
		t.Fatalf("credential without a store: got %v", err)
	}
}
