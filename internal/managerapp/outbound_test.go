package managerapp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/appoptions"
	"github.com/b10x/connector-mcp/internal/audit"
	"github.com/b10x/connector-mcp/internal/review"
	"github.com/b10x/connector-mcp/refusal"
)

// countingServer is a plain-http server on one loopback address counting the connections it
// accepts (a refused dial never reaches it).
type countingServer struct {
	srv   *httptest.Server
	conns atomic.Int64
}

func newCountingServer(t *testing.T, ip string) *countingServer {
	t.Helper()
	var lc net.ListenConfig
	ln, err := lc.Listen(context.Background(), "tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("listen on %s: %v", ip, err)
	}
	c := &countingServer{}
	c.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	c.srv.Listener.Close()
	c.srv.Listener = ln
	c.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			c.conns.Add(1)
		}
	}
	c.srv.Start()
	t.Cleanup(c.srv.Close)
	return c
}

// fakeCluster is a cluster whose apiserver Service, its EndpointSlice, a ServiceCIDR and the
// gateway's Service and EndpointSlice all sit on loopback aliases (the fake client does not
// validate addresses), so each can host a counting server.
func fakeCluster() client.Reader {
	slice := func(ns, svc, addr string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: svc + "-abc", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
			AddressType: discoveryv1.AddressTypeIPv4, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{addr}}},
		}
	}
	return fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes"}, Spec: corev1.ServiceSpec{ClusterIP: "127.0.0.2", ClusterIPs: []string{"127.0.0.2"}}},
		slice("default", "kubernetes", "127.0.0.3"),
		&networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"127.0.0.16/28"}}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "connector-mcp-system", Name: "connector-mcp-gateway"}, Spec: corev1.ServiceSpec{ClusterIP: "127.0.0.5"}},
		slice("connector-mcp-system", "connector-mcp-gateway", "127.0.0.6"),
	).Build()
}

// outboundClient is one of the binaries' free-standing outbound clients as the wiring builds
// it: do sends one request to url and returns the egress error, if any.
type outboundClient struct {
	name string
	do   func(t *testing.T, o Options, ip egress.IPPolicy, deny egress.DenySource, url string) error
}

var outboundClients = []outboundClient{
	{"oauth-producer", func(t *testing.T, _ Options, ip egress.IPPolicy, deny egress.DenySource, url string) error {
		hc, err := producerHTTPClient(ip, deny, nil, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return get(hc, url)
	}},
	{"registry", func(t *testing.T, o Options, ip egress.IPPolicy, deny egress.DenySource, url string) error {
		hc, err := appoptions.RegistryHTTPClient(ip, deny, nil, o.ExchangeTimeout)
		if err != nil {
			t.Fatal(err)
		}
		return get(hc, url)
	}},
	{"drift-webhook", func(t *testing.T, o Options, ip egress.IPPolicy, deny egress.DenySource, url string) error {
		o.DriftWebhookURL = url
		var r refusalLog
		sink, err := driftWebhookSink(o, ip, deny, r.log)
		if err != nil {
			t.Fatal(err)
		}
		return r.deliverOnce(t, sink.Start, func() { sink.Notify(review.DriftNotice{Namespace: "team-a", Deployment: "svc"}) }, sink.Metrics().Sent)
	}},
	{"audit-webhook", func(t *testing.T, o Options, ip egress.IPPolicy, deny egress.DenySource, url string) error {
		o.AuditLog = url
		var r refusalLog
		l, wh, err := appoptions.OpenAudit(auditInputs(o, ip, deny, nil, r.log))
		if err != nil || wh == nil {
			t.Fatalf("OpenAudit(%s) = %v, %v", url, wh, err)
		}
		return r.deliverOnce(t, wh.Start, func() { _ = l.Write(audit.Record{Kind: audit.KindActivation, Outcome: "Activated"}) }, wh.Metrics().Sent)
	}},
}

// refusalLog records the refusal name of a webhook's drop log line.
type refusalLog struct {
	mu      sync.Mutex
	refused string
	done    chan struct{}
	once    sync.Once
}

func (r *refusalLog) init() { r.once.Do(func() { r.done = make(chan struct{}, 1) }) }

func (r *refusalLog) log(_ string, kv ...any) {
	r.init()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i] == "refusal" {
			r.refused, _ = kv[i+1].(string)
		}
	}
	select {
	case r.done <- struct{}{}:
	default:
	}
}

// deliverOnce runs a webhook sink with start, offers one payload and waits until sent counts it
// (nil) or the sink logs a drop (the refusal logged, as an error).
func (r *refusalLog) deliverOnce(t *testing.T, start func(context.Context) error, offer func(), sent prometheus.Counter) error {
	t.Helper()
	r.init()
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { _ = start(ctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()
	offer()
	deadline := time.After(30 * time.Second)
	for {
		if testutil.ToFloat64(sent) == 1 {
			return nil
		}
		select {
		case <-r.done:
			r.mu.Lock()
			defer r.mu.Unlock()
			return fmt.Errorf("dropped: %w", refusalError(r.refused))
		case <-deadline:
			t.Fatal("the payload was neither sent nor dropped")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestOutboundClientsRefuseClusterAddresses: each of the binaries' free-standing outbound
// clients — the OCI registry client, the OAuth producer's, the drift webhook's and the audit
// webhook's, built as the manager wires them — refuses, with destination_refused and
// before connecting, the apiserver's Service IP and EndpointSlice address, an address of a
// ServiceCIDR object and of a --service-cidr flag, the gateway's own Service IP and endpoint
// (--gateway-service) and the metadata address. The must-pass twin: an address outside the deny
// list is reached by each client; the must-fail twin: a client built without the deny list (as
// the registry and webhook clients were) reaches the apiserver's endpoint.
func TestOutboundClientsRefuseClusterAddresses(t *testing.T) {
	o := DefaultOptions()
	o.ServiceCIDRs = []string{"127.0.0.32/28"}
	o.GatewayService = "connector-mcp-system/connector-mcp-gateway"
	o.AllowLoopbackUnsafe = true // plain-http counting servers on loopback aliases
	ip := egress.IPPolicy{Loopback: egress.LoopbackAllowedUnsafe}
	deny, err := o.ClusterDeny(fakeCluster())
	if err != nil {
		t.Fatal(err)
	}
	denied := map[string]*countingServer{
		"apiserver Service IP":     newCountingServer(t, "127.0.0.2"),
		"apiserver endpoint":       newCountingServer(t, "127.0.0.3"),
		"ServiceCIDR object":       newCountingServer(t, "127.0.0.17"),
		"--service-cidr flag":      newCountingServer(t, "127.0.0.33"),
		"gateway Service IP":       newCountingServer(t, "127.0.0.5"),
		"gateway Service endpoint": newCountingServer(t, "127.0.0.6"),
	}
	allowed := newCountingServer(t, "127.0.0.1")
	for _, c := range outboundClients {
		t.Run(c.name, func(t *testing.T) {
			for what, srv := range denied {
				err := c.do(t, o, ip, deny, srv.srv.URL+"/x")
				if refusal.Name(err) != egress.RefusalDestination {
					t.Errorf("%s: err = %v, want refusal %s", what, err, egress.RefusalDestination)
				}
			}
			for what, srv := range denied {
				if n := srv.conns.Load(); n != 0 {
					t.Errorf("%s: %d connections reached the server", what, n)
				}
			}
			if err := c.do(t, o, ip, deny, "http://169.254.169.254/latest/meta-data/"); refusal.Name(err) != egress.RefusalDestination {
				t.Errorf("metadata: err = %v, want refusal %s", err, egress.RefusalDestination)
			}
			before := allowed.conns.Load()
			if err := c.do(t, o, ip, deny, allowed.srv.URL+"/x"); err != nil {
				t.Fatalf("an address outside the deny list: %v", err)
			}
			if allowed.conns.Load() == before {
				t.Fatal("the allowed server saw no connection")
			}
		})
	}
	// Must-fail twin: without the cluster deny list (an empty one) the apiserver's endpoint is
	// reached, so the refusals above come from the deny list, not from the IP policy alone.
	empty := egress.DenyFunc(func(context.Context) ([]netip.Prefix, error) { return nil, nil })
	srv := denied["apiserver endpoint"]
	if err := outboundClients[1].do(t, o, ip, empty, srv.srv.URL+"/x"); err != nil {
		t.Fatalf("registry client without the deny list: %v", err)
	}
	if srv.conns.Load() == 0 {
		t.Fatal("without the deny list the apiserver endpoint was not reached: the test proves nothing")
	}
}

// A deny list that cannot be read refuses the dial (fail closed): policy_unavailable.
func TestOutboundClientFailsClosedWithoutDenyList(t *testing.T) {
	allowed := newCountingServer(t, "127.0.0.1")
	broken := egress.DenyFunc(func(context.Context) ([]netip.Prefix, error) { return nil, errors.New("apiserver unreachable") })
	ip := egress.IPPolicy{Loopback: egress.LoopbackAllowedUnsafe}
	err := outboundClients[0].do(t, DefaultOptions(), ip, broken, allowed.srv.URL)
	var de *egress.DestinationError
	if !errors.As(err, &de) || de.Reason != "policy_unavailable" {
		t.Fatalf("err = %v, want a destination refusal policy_unavailable", err)
	}
	if allowed.conns.Load() != 0 {
		t.Fatal("a dial went through without the deny list")
	}
}

func get(hc *http.Client, url string) error {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// namedError carries a refusal name reported in a log line.
type namedError string

func (e namedError) Error() string   { return "refused: " + string(e) }
func (e namedError) Refusal() string { return string(e) }

func refusalError(name string) error {
	if strings.TrimSpace(name) == "" {
		return errors.New("dropped without a refusal name")
	}
	return namedError(name)
}
