package k8sbinding

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/refusal"
)

// counting is a plain-http loopback server on ip counting accepted connections.
func counting(t *testing.T, ip string) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var lc net.ListenConfig
	ln, err := lc.Listen(context.Background(), "tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			n.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &n
}

// stubResolver answers every name with one address.
type stubResolver struct{ addr netip.Addr }

func (r stubResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{r.addr}, nil
}

var gatewayService = types.NamespacedName{Namespace: "connector-mcp-system", Name: "connector-mcp-gateway"}

// gatewayObjects are the gateway's Service (cluster IP 127.0.0.5) and EndpointSlice (pod
// 127.0.0.6) on loopback aliases (the fake client does not validate addresses).
func gatewayObjects() []client.Object {
	return []client.Object{
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: gatewayService.Namespace, Name: gatewayService.Name},
			Spec: corev1.ServiceSpec{ClusterIP: "127.0.0.5", ClusterIPs: []string{"127.0.0.5"}}},
		&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: gatewayService.Namespace, Name: "gw-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: gatewayService.Name}},
			AddressType: discoveryv1.AddressTypeIPv4, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"127.0.0.6"}}}},
	}
}

func exchange(t *testing.T, b *Binder, host string, port string) error {
	t.Helper()
	url := "http://" + net.JoinHostPort(host, port) + "/mcp"
	tr, err := b.Transport(context.Background(), Request{Namespace: "team-a", URL: url})
	if err != nil {
		return err
	}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, url, nil)
	_, err = tr.Exchange(context.Background(), req)
	return err
}

// Item 9d: a deployment whose endpoint is the gateway's own Service (its cluster IP or a pod
// address of its EndpointSlice) is refused destination_refused before any byte is sent, by the
// Binder the manager's freeze and the gateway's calls share: as an IP literal before the port
// is built, and as a name that resolves there at dial time. Twin: without --gateway-service the
// same endpoint is reached (the counting server sees the connection).
func TestBinderDeniesTheGatewaysOwnService(t *testing.T) {
	cl := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(gatewayObjects()...).Build()
	base := egress.Policy{IP: egress.IPPolicy{Loopback: egress.LoopbackAllowedUnsafe}, Timeout: 5 * time.Second}
	for _, ip := range []string{"127.0.0.5", "127.0.0.6"} {
		srv, conns := counting(t, ip)
		_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
		denied := &Binder{Base: base, Deny: &APIServerDeny{Reader: cl, Services: []types.NamespacedName{gatewayService}}}
		if err := exchange(t, denied, ip, port); refusal.Name(err) != egress.RefusalDestination {
			t.Errorf("%s as a literal: err = %v, want %s", ip, err, egress.RefusalDestination)
		}
		byName := &Binder{Base: base, Deny: denied.Deny}
		byName.Base.Resolver = stubResolver{netip.MustParseAddr(ip)}
		if err := exchange(t, byName, "gateway.connector-mcp-system.svc", port); refusal.Name(err) != egress.RefusalDestination {
			t.Errorf("%s by name: err = %v, want %s", ip, err, egress.RefusalDestination)
		}
		if n := conns.Load(); n != 0 {
			t.Fatalf("%s: %d connections reached the gateway", ip, n)
		}
		// Must-fail twin: the deny list without the gateway's Service reaches it.
		open := &Binder{Base: base, Deny: &APIServerDeny{Reader: cl}}
		if err := exchange(t, open, ip, port); err != nil {
			t.Fatalf("%s without --gateway-service: %v", ip, err)
		}
		if conns.Load() == 0 {
			t.Fatalf("%s without --gateway-service: no connection, the test proves nothing", ip)
		}
	}
}

// The deny list is read again at every dial, not only when the port is built: a port built
// before the address was denied refuses its next dial.
func TestDenyListIsReadAtDialTime(t *testing.T) {
	srv, conns := counting(t, "127.0.0.7")
	var deny atomic.Bool
	src := DenyFunc(func(context.Context) ([]netip.Prefix, error) {
		if deny.Load() {
			return []netip.Prefix{netip.MustParsePrefix("127.0.0.7/32")}, nil
		}
		return nil, nil
	})
	b := &Binder{Base: egress.Policy{IP: egress.IPPolicy{Loopback: egress.LoopbackAllowedUnsafe}, Timeout: 5 * time.Second}, Deny: src}
	tr, err := b.Transport(context.Background(), Request{Namespace: "team-a", URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	send := func() error {
		tr.CloseIdleConnections() // a new dial each time
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL, nil)
		_, err := tr.Exchange(context.Background(), req)
		return err
	}
	if err := send(); err != nil {
		t.Fatalf("before the deny: %v", err)
	}
	deny.Store(true)
	before := conns.Load()
	if err := send(); refusal.Name(err) != egress.RefusalDestination {
		t.Fatalf("after the deny: err = %v, want %s", err, egress.RefusalDestination)
	}
	if conns.Load() != before {
		t.Fatal("the denied dial connected")
	}
}

func TestParseServiceName(t *testing.T) {
	if n, err := ParseServiceName("ns/gw"); err != nil || n != (types.NamespacedName{Namespace: "ns", Name: "gw"}) {
		t.Fatalf("ns/gw: %v %v", n, err)
	}
	for _, bad := range []string{"gw", "/gw", "ns/", "a/b/c"} {
		if _, err := ParseServiceName(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
