package invocation_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/invocation"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
	"github.com/b10x/connector-mcp/internal/mcptest"
	"github.com/b10x/connector-mcp/mcpclient"
)

// The hosted egress policy refuses the loopback test server at dial time, and plain http: the
// call really goes through the port.
func TestHostedPolicyRefusesLoopback(t *testing.T) {
	srv := mcptest.StartHTTPS(mcptest.NewServer("files", testTools()), mcptest.Modern)
	t.Cleanup(srv.Close)
	doc := freezeWith(t, srv.URL, srv.Client())
	roots := &tls.Config{RootCAs: srv.CertPool(), MinVersion: tls.VersionTLS12}
	invoke := func(url string, ip egress.IPPolicy) error {
		api := &fakeAPIServer{allow: map[string]bool{alice.User: true}}
		opts := loopbackOptions(api)
		opts.Connector = &invocation.EgressConnector{IP: ip, TLSClientConfig: roots}
		s, err := invocation.NewSurface(doc, deployment(doc, url), opts)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		d, err := s.Describe(context.Background(), alice, "echo", "files")
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Invoke(context.Background(), invocation.Request{Caller: alice, Lease: d.Lease, Operation: "echo", Connection: "files"})
		return err
	}
	hosted := egress.IPPolicy{} // loopback denied
	err := invoke(srv.URL, hosted)
	var de *egress.DestinationError
	if !errors.Is(err, invocation.ErrCallFailed) || !errors.As(err, &de) || de.Reason != "loopback" || refusal(err) != "destination_refused" {
		t.Fatalf("hosted policy over https: %v", err)
	}
	if err := invoke(strings.Replace(srv.URL, "https://", "http://", 1), hosted); refusal(err) != "scheme_refused" {
		t.Fatalf("hosted policy over http: %v", err)
	}
	// Twin: the same server with loopback allowed explicitly.
	if err := invoke(srv.URL, egress.IPPolicy{Loopback: egress.LoopbackAllowedUnsafe}); err != nil {
		t.Fatal(err)
	}
}

// The bearer named by the deployment's credentialRef is read from its Secret and reaches the
// server; it never appears in an error.
func TestCredential(t *testing.T) {
	const token = "s3cret-token-value"
	open := mcptest.StartHTTP(mcptest.NewServer("files", testTools()), mcptest.Modern)
	t.Cleanup(open.Close)
	doc := freeze(t, open.URL) // the same tools: the same snapshot
	var good, bad atomic.Int64
	inner := mcptest.HTTPHandler(mcptest.NewServer("files", testTools()), mcptest.Modern)
	protected := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			bad.Add(1)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		good.Add(1)
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(protected.Close)
	host := strings.TrimPrefix(protected.URL, "http://")
	optIn := func(name, hosts string, labelled bool) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: name,
			Annotations: map[string]string{apiv1.CredentialAllowedHostsAnnotation: hosts}},
			Data: map[string][]byte{"token": []byte(token + "\n")}}
		if labelled {
			s.Labels = map[string]string{apiv1.CredentialLabel: "true"}
		}
		return s
	}
	secrets := fake.NewClientBuilder().WithObjects(
		optIn("files-token", host, true),
		optIn("unlabelled", host, false),
		optIn("elsewhere", "mcp.example.com", true),
	).Build()
	api := &fakeAPIServer{allow: map[string]bool{alice.User: true}}
	invoke := func(ref *apiv1.CredentialRef, withSecrets bool) error {
		dep := deployment(doc, protected.URL+"/mcp")
		dep.Spec.MCPConnection.CredentialRef = ref
		opts := loopbackOptions(api)
		if withSecrets {
			opts.Connector.(*invocation.EgressConnector).Secrets = secrets
		}
		s, err := invocation.NewSurface(doc, dep, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		d, err := s.Describe(context.Background(), alice, "echo", "files")
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Invoke(context.Background(), invocation.Request{Caller: alice, Lease: d.Lease, Operation: "echo", Connection: "files"})
		return err
	}
	if err := invoke(&apiv1.CredentialRef{Name: "files-token", Key: "token"}, true); err != nil {
		t.Fatal(err)
	}
	if good.Load() == 0 || bad.Load() != 0 {
		t.Fatalf("authorized exchanges %d, unauthorized %d", good.Load(), bad.Load())
	}
	// Twins: a key the Secret does not have; no Secret reader; no credential at all.
	// (mcpclient reports the egress credential failure as a failed exchange; the cause is not
	// kept, and nothing of the token is.)
	bad0 := bad.Load()
	err := invoke(&apiv1.CredentialRef{Name: "files-token", Key: "other"}, true)
	if !errors.Is(err, invocation.ErrCallFailed) || strings.Contains(err.Error(), token) || bad.Load() != bad0 {
		t.Fatalf("missing key: %v", err)
	}
	// The same opt-in rule as the manager's freeze: an unlabelled Secret and one for another host
	// are refused by name, and nothing reaches the server.
	for name, want := range map[string]string{"unlabelled": k8sbinding.RefusalCredentialNotOptedIn, "elsewhere": k8sbinding.RefusalCredentialHostNotAllowed} {
		err := invoke(&apiv1.CredentialRef{Name: name, Key: "token"}, true)
		var r *k8sbinding.CredentialRefusal
		if !errors.As(err, &r) || r.Refusal() != want || bad.Load() != bad0 || strings.Contains(err.Error(), token) {
			t.Fatalf("%s: %v, want %s with nothing sent", name, err, want)
		}
	}
	if err := invoke(&apiv1.CredentialRef{Name: "files-token", Key: "token"}, false); !errors.Is(err, invocation.ErrCallFailed) {
		t.Fatalf("no Secrets reader: %v", err)
	}
	before := bad.Load()
	if err := invoke(nil, true); !errors.Is(err, invocation.ErrCallFailed) || bad.Load() == before {
		t.Fatalf("no credential: %v (unauthorized exchanges %d -> %d)", err, before, bad.Load())
	}
}

// A legacy (2025-11-25, stateful) server is reached the same way.
func TestLegacyServer(t *testing.T) {
	srv := mcptest.StartHTTP(mcptest.NewServer("files", testTools()), mcptest.Legacy)
	t.Cleanup(srv.Close)
	doc := freeze(t, srv.URL)
	if doc.Snapshot.ProtocolVersion != "2025-11-25" {
		t.Fatalf("protocol %s", doc.Snapshot.ProtocolVersion)
	}
	api := &fakeAPIServer{allow: map[string]bool{alice.User: true}}
	s, err := invocation.NewSurface(doc, deployment(doc, srv.URL), loopbackOptions(api))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d, err := s.Describe(context.Background(), alice, "add", "files")
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Invoke(context.Background(), invocation.Request{Caller: alice, Lease: d.Lease, Operation: "add", Connection: "files", Arguments: json.RawMessage(`{"a":1,"b":2}`)})
	if err != nil || !strings.Contains(string(res.JSON), `"text":"3"`) {
		t.Fatalf("%v %s", err, res.JSON)
	}
}

// countingConnector counts connections and can make the next session's first call fail as a
// closed connection would.
type countingConnector struct {
	inner    invocation.Connector
	connects atomic.Int64
	closes   atomic.Int64
	breakOne atomic.Bool
	// gate, when set, holds every call until it is closed; entered is signalled on entry.
	gate, entered chan struct{}
}

func (c *countingConnector) Connect(ctx context.Context, ep invocation.Endpoint) (invocation.Session, error) {
	c.connects.Add(1)
	s, err := c.inner.Connect(ctx, ep)
	if err != nil {
		return nil, err
	}
	return &breakableSession{Session: s, c: c}, nil
}

type breakableSession struct {
	invocation.Session
	c *countingConnector
}

func (s *breakableSession) Close() error {
	s.c.closes.Add(1)
	return s.Session.Close()
}

func (s *breakableSession) CallTool(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	if s.c.gate != nil {
		s.c.entered <- struct{}{}
		<-s.c.gate
	}
	if s.c.breakOne.CompareAndSwap(true, false) {
		return nil, &mcpclient.TransportError{Op: "tools/call", Err: mcpclient.ErrConnectionClosed}
	}
	return s.Session.CallTool(ctx, name, args)
}

func TestSessionReuse(t *testing.T) {
	cc := &countingConnector{}
	f := newFixture(t, nil, func(o *invocation.Options) {
		cc.inner = o.Connector
		o.Connector = cc
	})
	ctx := context.Background()
	d := f.describe(t, alice, "echo")
	req := invocation.Request{Caller: alice, Lease: d.Lease, Operation: "echo", Connection: "files"}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := f.s.Invoke(ctx, req); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := cc.connects.Load(); n != 1 {
		t.Fatalf("%d connections for 8 concurrent calls", n)
	}
	// A closed connection drops the session; the next call connects again.
	cc.breakOne.Store(true)
	if _, err := f.s.Invoke(ctx, req); !errors.Is(err, mcpclient.ErrConnectionClosed) || !errors.Is(err, invocation.ErrCallFailed) {
		t.Fatalf("broken call: %v", err)
	}
	if _, err := f.s.Invoke(ctx, req); err != nil {
		t.Fatal(err)
	}
	if n := cc.connects.Load(); n != 2 {
		t.Fatalf("%d connections after a broken session, want 2", n)
	}
	// Twin: a tool error is not a broken session.
	fd := f.describe(t, alice, "fail")
	if _, err := f.s.Invoke(ctx, invocation.Request{Caller: alice, Lease: fd.Lease, Operation: "fail", Connection: "files"}); !errors.Is(err, invocation.ErrToolError) {
		t.Fatal(err)
	}
	if _, err := f.s.Invoke(ctx, req); err != nil {
		t.Fatal(err)
	}
	if n := cc.connects.Load(); n != 2 {
		t.Fatalf("%d connections after a tool error, want 2", n)
	}
}

func TestSessionMaxAge(t *testing.T) {
	cc := &countingConnector{}
	clk := clocktesting.NewFakePassiveClock(time.Unix(1_800_000_000, 0))
	f := newFixture(t, nil, func(o *invocation.Options) {
		cc.inner, o.Connector = o.Connector, cc
		// The re-list interval is out of the way: this is the session age alone.
		o.MaxSessionAge, o.Clock, o.RelistInterval = time.Minute, clk, time.Hour
	})
	ctx := context.Background()
	d := f.describe(t, alice, "echo")
	req := invocation.Request{Caller: alice, Lease: d.Lease, Operation: "echo", Connection: "files"}
	call := func() error { _, err := f.s.Invoke(ctx, req); return err }
	if err := call(); err != nil {
		t.Fatal(err)
	}
	clk.SetTime(clk.Now().Add(59 * time.Second))
	// The server changes a tool: within the session's age the open session keeps serving.
	mcptest.SetTool(f.srv.Server, &mcp.Tool{Name: "add", Description: "Add, changed.", InputSchema: json.RawMessage(`{"type":"object"}`)})
	if err := call(); err != nil || cc.connects.Load() != 1 {
		t.Fatalf("within the age: %v, %d connections", err, cc.connects.Load())
	}
	// Twin: past the age the surface reconnects, re-lists, and refuses the drift.
	clk.SetTime(clk.Now().Add(2 * time.Second))
	var de *invocation.DriftError
	if err := call(); !errors.As(err, &de) || cc.connects.Load() != 2 {
		t.Fatalf("past the age: %v, %d connections", err, cc.connects.Load())
	}
}

// A session retired while a call runs on it is closed only when that call ends.
func TestSessionRetiredAfterCallsEnd(t *testing.T) {
	cc := &countingConnector{}
	clk := clocktesting.NewFakePassiveClock(time.Unix(1_800_000_000, 0))
	f := newFixture(t, nil, func(o *invocation.Options) {
		cc.inner, o.Connector = o.Connector, cc
		o.MaxSessionAge, o.Clock = time.Minute, clk
	})
	ctx := context.Background()
	d := f.describe(t, alice, "echo")
	req := invocation.Request{Caller: alice, Lease: d.Lease, Operation: "echo", Connection: "files"}
	cc.gate, cc.entered = make(chan struct{}), make(chan struct{}, 2)
	first := make(chan error, 1)
	go func() { _, err := f.s.Invoke(ctx, req); first <- err }()
	<-cc.entered // the first call runs on session 1
	clk.SetTime(clk.Now().Add(2 * time.Minute))
	second := make(chan error, 1)
	go func() { _, err := f.s.Invoke(ctx, req); second <- err }()
	<-cc.entered // the second call runs on session 2; session 1 is retired
	if n := cc.closes.Load(); n != 0 {
		t.Fatalf("session closed under a running call (%d closes)", n)
	}
	close(cc.gate)
	for _, ch := range []chan error{first, second} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	if c, n := cc.connects.Load(), cc.closes.Load(); c != 2 || n != 1 {
		t.Fatalf("%d connections, %d closes; want 2 and 1", c, n)
	}
}

// A negative MaxSessionAge uses one session per call, closed after it.
func TestSessionNotReused(t *testing.T) {
	cc := &countingConnector{}
	f := newFixture(t, nil, func(o *invocation.Options) {
		cc.inner, o.Connector = o.Connector, cc
		o.MaxSessionAge = -1
	})
	d := f.describe(t, alice, "echo")
	for range 3 {
		if _, err := f.s.Invoke(context.Background(), invocation.Request{Caller: alice, Lease: d.Lease, Operation: "echo", Connection: "files"}); err != nil {
			t.Fatal(err)
		}
	}
	if c, n := cc.connects.Load(), cc.closes.Load(); c != 3 || n != 3 {
		t.Fatalf("%d connections, %d closes; want 3 and 3", c, n)
	}
}

// The in-cluster apiserver is never reachable through a surface, whatever the policy allows: the
// test server stands in for it by being KUBERNETES_SERVICE_HOST.
func TestAPIServerAlwaysDenied(t *testing.T) {
	for _, c := range []struct {
		host string
		want string
	}{{"127.0.0.1", "destination_refused"}, {"", ""}} {
		t.Run("host="+c.host, func(t *testing.T) {
			f := newFixture(t, nil, func(o *invocation.Options) {
				o.Connector = &invocation.EgressConnector{
					IP: egress.IPPolicy{Loopback: egress.LoopbackAllowedUnsafe},
					Getenv: func(k string) string {
						if k == "KUBERNETES_SERVICE_HOST" {
							return c.host
						}
						return ""
					},
				}
			})
			d := f.describe(t, alice, "echo")
			_, err := f.s.Invoke(context.Background(), invocation.Request{Caller: alice, Lease: d.Lease, Operation: "echo", Connection: "files"})
			var de *egress.DestinationError
			if got := refusal(err); got != c.want || (c.want != "" && (!errors.As(err, &de) || de.Reason != "apiserver")) {
				t.Fatalf("refusal %q (%v), want %q", got, err, c.want)
			}
		})
	}
}
