package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// serveCounting starts h on ln and counts the connections it accepts.
func serveCounting(t *testing.T, ln net.Listener, h http.Handler) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

// TestRebindingBetweenReusedExchanges: exchanges of one port reuse a pooled connection (no new
// lookup, no new dial), and the first new connection after it is judged again: the name now
// resolves outside the allow-list (127.0.0.6) and the dial is refused; the server standing
// there receives nothing.
func TestRebindingBetweenReusedExchanges(t *testing.T) {
	allowedLn := listenTCP(t, "127.0.0.5")
	port := allowedLn.Addr().(*net.TCPAddr).Port
	deniedLn, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", net.JoinHostPort("127.0.0.6", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("listen on 127.0.0.6:%d: %v", port, err)
	}
	var served atomic.Int32
	_, allowedConns := serveCounting(t, allowedLn, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if served.Add(1) == 2 {
			// The server ends the kept-alive connection: the next exchange needs a new one.
			w.Header().Set("Connection", "close")
		}
		_, _ = io.WriteString(w, `{}`)
	}))
	var deniedSaw atomic.Int32
	_, deniedConns := serveCounting(t, deniedLn, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		deniedSaw.Add(1)
	}))

	res := newStubResolver()
	res.rebind["svc.rebind.test"] = [][]netip.Addr{{netip.MustParseAddr("127.0.0.5")}, {netip.MustParseAddr("127.0.0.6")}}
	u := "http://svc.rebind.test:" + strconv.Itoa(port) + "/mcp"
	p := inCluster(u)
	p.Resolver = res
	tr := newTransport(t, p)

	for i := 1; i <= 2; i++ {
		if _, err := tr.Exchange(context.Background(), post(t, u, `{}`)); err != nil {
			t.Fatalf("exchange %d on the allowed address: %v", i, err)
		}
	}
	if n := allowedConns.Load(); n != 1 {
		t.Fatalf("two exchanges used %d connections, want 1 (reuse within the port)", n)
	}
	if n := res.lookups["svc.rebind.test"]; n != 1 {
		t.Fatalf("two exchanges made %d lookups, want 1", n)
	}

	_, err = tr.Exchange(context.Background(), post(t, u, `{}`))
	var de *DestinationError
	if !errors.As(err, &de) || de.Reason != "loopback" {
		t.Fatalf("exchange after rebinding: got %v, want destination_refused (loopback) judged on the new connection", err)
	}
	if res.lookups["svc.rebind.test"] != 2 {
		t.Fatalf("the new connection was not resolved afresh (%d lookups)", res.lookups["svc.rebind.test"])
	}
	if deniedConns.Load() != 0 || deniedSaw.Load() != 0 {
		t.Fatalf("the rebound address received %d connections, %d requests", deniedConns.Load(), deniedSaw.Load())
	}
}

// blackhole is a connect hook: attempts to the blackholed address hang (a peer that never
// answers SYN) until their context ends; others are really dialed on loopback. The dialer's
// Control runs first for both, as connect(2) would.
type blackhole struct {
	addr     netip.Addr
	mu       sync.Mutex
	attempts []string
}

func (b *blackhole) connect(ctx context.Context, nd *net.Dialer, network, address string) (net.Conn, error) {
	b.mu.Lock()
	b.attempts = append(b.attempts, address)
	b.mu.Unlock()
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return nil, err
	}
	if ap.Addr() == b.addr {
		if err := nd.Control(network, address, nil); err != nil {
			return nil, &net.OpError{Op: "dial", Net: network, Err: err}
		}
		<-ctx.Done()
		return nil, &net.OpError{Op: "dial", Net: network, Err: ctx.Err()}
	}
	return nd.DialContext(ctx, network, address)
}

func (b *blackhole) tried() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.attempts...)
}

// happyEnv is a name answering a blackholed address first and a live server second, both in
// the allow-list.
func happyEnv(t *testing.T) (u string, p Policy, srvAddr string, served *atomic.Int32) {
	t.Helper()
	ln := listenTCP(t, "127.0.0.5")
	port := ln.Addr().(*net.TCPAddr).Port
	served = &atomic.Int32{}
	serveCounting(t, ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		_, _ = io.WriteString(w, `{}`)
	}))
	res := newStubResolver()
	res.names["two.happy.test"] = []netip.Addr{netip.MustParseAddr("127.0.0.7"), netip.MustParseAddr("127.0.0.5")}
	u = "http://two.happy.test:" + strconv.Itoa(port) + "/mcp"
	p = inCluster(u)
	p.Resolver = res
	p.Timeout = time.Minute
	return u, p, ln.Addr().String(), served
}

// TestHappyEyeballsBlackholedFirstAddress: the first address never answers; the second is
// tried beside it after the fallback delay and the exchange succeeds within the budget passed
// (10 s; the blackholed attempt alone would hang until it ends).
func TestHappyEyeballsBlackholedFirstAddress(t *testing.T) {
	u, p, srvAddr, served := happyEnv(t)
	tr := newTransport(t, p)
	bh := &blackhole{addr: netip.MustParseAddr("127.0.0.7")}
	tr.dialer.connect = bh.connect
	tr.dialer.FallbackDelay = 50 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := tr.Exchange(ctx, post(t, u, `{}`)); err != nil {
		t.Fatalf("exchange with a blackholed first address: %v", err)
	}
	if got := bh.tried(); len(got) != 2 || !strings.HasPrefix(got[0], "127.0.0.7:") || got[1] != srvAddr {
		t.Fatalf("attempts %v, want the blackholed address first, then %s", got, srvAddr)
	}
	if served.Load() != 1 {
		t.Fatalf("server saw %d requests, want 1", served.Load())
	}
}

// TestHappyEyeballsTwinWithoutFallback is the twin: with the second attempt held back beyond
// the budget, the blackholed first address eats the whole deadline and the exchange fails with
// deadline_exceeded; the live server is never tried.
func TestHappyEyeballsTwinWithoutFallback(t *testing.T) {
	u, p, _, served := happyEnv(t)
	tr := newTransport(t, p)
	bh := &blackhole{addr: netip.MustParseAddr("127.0.0.7")}
	tr.dialer.connect = bh.connect
	tr.dialer.FallbackDelay = time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := tr.Exchange(ctx, post(t, u, `{}`))
	if !errors.Is(err, ErrDeadlineExceeded) {
		t.Fatalf("got %v, want deadline_exceeded", err)
	}
	if got := bh.tried(); len(got) != 1 {
		t.Fatalf("attempts %v, want only the blackholed one", got)
	}
	if served.Load() != 0 {
		t.Fatalf("server saw %d requests", served.Load())
	}
}

// TestHappyEyeballsOrder: families alternate, starting with the first answer's family.
func TestHappyEyeballsOrder(t *testing.T) {
	in := []netip.Addr{netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2"),
		netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.3")}
	want := "2001:db8::1 192.0.2.1 2001:db8::2 192.0.2.2 192.0.2.3"
	var got []string
	for _, a := range interleave(in) {
		got = append(got, a.String())
	}
	if strings.Join(got, " ") != want {
		t.Fatalf("order %v, want %s", got, want)
	}
}

// TestHappyEyeballsRefusalReported: when every address fails, the policy refusal is what the
// caller sees, even if a later address failed otherwise.
func TestHappyEyeballsRefusalReported(t *testing.T) {
	refused := &DestinationError{Addr: "a", Reason: "private"}
	other := errors.New("connection refused")
	_, err := raceDial(context.Background(), []string{"a", "b"}, time.Millisecond, func(_ context.Context, a string) (net.Conn, error) {
		if a == "a" {
			return nil, refused
		}
		return nil, other
	})
	if !errors.Is(err, refused) {
		t.Fatalf("got %v, want the refusal", err)
	}
	_, err = raceDial(context.Background(), []string{"b"}, time.Millisecond, func(context.Context, string) (net.Conn, error) { return nil, other })
	if !errors.Is(err, other) {
		t.Fatalf("got %v, want the last error", err)
	}
}

// TestPrivateCABinding: a binding naming its own CA bundle reaches a server whose certificate
// that CA issued; without it the exchange is refused as tls_unknown_authority with a fixed
// text, and a name the certificate does not cover is tls_hostname_mismatch.
func TestPrivateCABinding(t *testing.T) {
	srv := serveTLS(t, jsonHandler(`{"ok":true}`))
	base := Policy{IP: IPPolicy{Loopback: LoopbackAllowedUnsafe}, Timeout: 5 * time.Second}

	tr, err := NewBindingTransport(base, Binding{URL: srv.URL + "/mcp", RootCAs: srv.certPool})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.CloseIdleConnections()
	if _, err := tr.Exchange(context.Background(), post(t, srv.URL+"/mcp", `{}`)); err != nil {
		t.Fatalf("with the bundle: %v", err)
	}

	bare, err := NewBindingTransport(base, Binding{URL: srv.URL + "/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	defer bare.CloseIdleConnections()
	_, err = bare.Exchange(context.Background(), post(t, srv.URL+"/mcp", `{}`))
	var te *TLSError
	if !errors.As(err, &te) || te.Refusal() != RefusalTLSUnknownAuthority || !errors.Is(err, ErrTLSRefused) {
		t.Fatalf("without the bundle: got %v, want %s", err, RefusalTLSUnknownAuthority)
	}
	if strings.Contains(err.Error(), "Acme") || strings.Contains(err.Error(), "x509") {
		t.Fatalf("refusal text carries certificate prose: %q", err)
	}

	// The base's roots are replaced, not extended: a base trusting the server does not help
	// a binding whose own bundle is another CA.
	other := x509.NewCertPool()
	trusting := base
	trusting.TLSClientConfig = &tls.Config{RootCAs: srv.certPool}
	wrong, err := NewBindingTransport(trusting, Binding{URL: srv.URL + "/mcp", RootCAs: other})
	if err != nil {
		t.Fatal(err)
	}
	defer wrong.CloseIdleConnections()
	if _, err := wrong.Exchange(context.Background(), post(t, srv.URL+"/mcp", `{}`)); !errors.As(err, &te) || te.Name != RefusalTLSUnknownAuthority {
		t.Fatalf("binding bundle of another CA: got %v, want %s", err, RefusalTLSUnknownAuthority)
	}

	res := newStubResolver()
	res.names["elsewhere.test"] = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	named := "https://elsewhere.test:" + strconv.Itoa(port) + "/mcp"
	base.Resolver = res
	mis, err := NewBindingTransport(base, Binding{URL: named, RootCAs: srv.certPool})
	if err != nil {
		t.Fatal(err)
	}
	defer mis.CloseIdleConnections()
	if _, err := mis.Exchange(context.Background(), post(t, named, `{}`)); !errors.As(err, &te) || te.Name != RefusalTLSHostnameMismatch {
		t.Fatalf("name outside the certificate: got %v, want %s", err, RefusalTLSHostnameMismatch)
	}
}

// TestTLSMinimumVersion: a server offering only TLS 1.1 is refused whatever the policy's
// TLS configuration asks for.
func TestTLSMinimumVersion(t *testing.T) {
	srv := httptest.NewUnstartedServer(jsonHandler(`{}`))
	srv.TLS = &tls.Config{MaxVersion: tls.VersionTLS11, MinVersion: tls.VersionTLS10} //nolint:gosec // the outdated server is the point of the test
	srv.StartTLS()
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	for _, cfg := range []*tls.Config{{RootCAs: pool}, {RootCAs: pool, MinVersion: tls.VersionTLS10}} {
		tr := newTransport(t, Policy{Endpoint: srv.URL + "/mcp", IP: IPPolicy{Loopback: LoopbackAllowedUnsafe}, TLSClientConfig: cfg, Timeout: 5 * time.Second})
		_, err := tr.Exchange(context.Background(), post(t, srv.URL+"/mcp", `{}`))
		if err == nil || !strings.Contains(err.Error(), "protocol version") {
			t.Fatalf("TLS 1.1 server (config MinVersion %#x): got %v, want a protocol version failure", cfg.MinVersion, err)
		}
	}
}

// closeCounter is a net.Conn that records Close; closedCh, when set, is closed on the first Close.
type closeCounter struct {
	net.Conn
	closed   atomic.Bool
	closedCh chan struct{}
}

func (c *closeCounter) Close() error {
	if !c.closed.Swap(true) && c.closedCh != nil {
		close(c.closedCh)
	}
	return nil
}

// TestHappyEyeballsLateWinnerClosed: when a second attempt connects after the race is decided,
// its connection is closed, not leaked; the still-running attempts see their context cancelled.
func TestHappyEyeballsLateWinnerClosed(t *testing.T) {
	release := make(chan struct{})
	late := &closeCounter{closedCh: make(chan struct{})}
	cancelled := make(chan struct{})
	c, err := raceDial(context.Background(), []string{"slow", "hung", "fast"}, time.Millisecond, func(ctx context.Context, a string) (net.Conn, error) {
		switch a {
		case "slow":
			<-release
			return late, nil
		case "fast":
			return &closeCounter{}, nil
		default:
			<-ctx.Done()
			close(cancelled)
			return nil, ctx.Err()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.(*closeCounter).closed.Load() {
		t.Fatal("the winner was closed")
	}
	close(release)
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the hung attempt was never cancelled")
	}
	select {
	case <-late.closedCh:
	case <-time.After(10 * time.Second):
		t.Fatal("the late connection was leaked")
	}
}
