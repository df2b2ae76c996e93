package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"
)

// target is one destination of the SSRF table. host is the URL host; stand names the
// loopback sink whose port the URL uses ("" = not a loopback route, port 443, never dialed).
// scheme defaults to https; an http target expects scheme_refused from the dial-time check
// (plain http reaches loopback only), any other destination_refused with the given reason.
type target struct {
	scheme string
	host   string
	stand  string
	reason string
	tweak  func(*Policy)
}

func (tg target) name() string {
	if tg.scheme != "" {
		return tg.scheme + "://" + tg.host
	}
	return tg.host
}

// hostedBase is the operator's policy used by the table. Its allow-list deliberately covers
// ranges it must never unlock (loopback, link-local, the ULA holding fd00:ec2::254, the
// apiserver's 10/8) to prove the allow-list cannot open them.
func hostedBase() Policy {
	return Policy{
		IP: IPPolicy{
			AllowCIDRs: []netip.Prefix{
				netip.MustParsePrefix("10.0.0.0/8"),
				netip.MustParsePrefix("127.0.0.0/8"),
				netip.MustParsePrefix("169.254.0.0/16"),
				netip.MustParsePrefix("fd00::/8"),
				netip.MustParsePrefix("100.100.0.0/16"),
			},
			DenyPrefixes: []netip.Prefix{netip.MustParsePrefix("10.96.0.1/32")},
		},
		Timeout: 5 * time.Second,
	}
}

func ssrfTargets() []target {
	allowLoopbackOtherPort := func(p *Policy) { p.IP.Loopback = LoopbackAllowedUnsafe; p.IP.Ports = []uint16{1} }
	noAllowList := func(p *Policy) { p.IP.AllowCIDRs = nil }
	allowLoopback := func(p *Policy) { p.IP.Loopback = LoopbackAllowedUnsafe }
	return []target{
		// Loopback, literal and odd forms.
		{host: "127.0.0.1", stand: "127.0.0.1", reason: "loopback"},
		{host: "127.1.2.3", stand: "127.1.2.3", reason: "loopback"},
		{host: "127.255.255.254", stand: "127.255.255.254", reason: "loopback"},
		{host: "localhost", stand: "127.0.0.1", reason: "loopback"},
		{host: "LOCALHOST.", stand: "127.0.0.1", reason: "loopback"},
		{host: "2130706433", stand: "127.0.0.1", reason: "loopback"},
		{host: "0x7f000001", stand: "127.0.0.1", reason: "loopback"},
		{host: "017700000001", stand: "127.0.0.1", reason: "loopback"},
		{host: "0177.0.0.1", stand: "127.0.0.1", reason: "loopback"},
		{host: "0x7f.0.0.1", stand: "127.0.0.1", reason: "loopback"},
		{host: "127.1", stand: "127.0.0.1", reason: "loopback"},
		{host: "127.0.1", stand: "127.0.0.1", reason: "loopback"},
		{host: "0x7f.1", stand: "127.0.0.1", reason: "loopback"},
		{host: "[::1]", stand: "::1", reason: "loopback"},
		{host: "[0:0:0:0:0:0:0:1]", stand: "::1", reason: "loopback"},
		{host: "[::ffff:127.0.0.1]", stand: "127.0.0.1", reason: "loopback"},
		{host: "[::ffff:7f00:1]", stand: "127.0.0.1", reason: "loopback"},
		{host: "[0:0:0:0:0:ffff:127.0.0.1]", stand: "127.0.0.1", reason: "loopback"},
		{host: "[::127.0.0.1]", reason: "loopback"},        // IPv4-compatible
		{host: "[64:ff9b::7f00:1]", reason: "loopback"},    // NAT64
		{host: "[2002:7f00:1::]", reason: "loopback"},      // 6to4
		{host: "[64:ff9b::127.0.0.1]", reason: "loopback"}, // NAT64, dotted
		// Unspecified (Linux delivers a connect to it locally).
		{host: "0.0.0.0", stand: "127.0.0.1", reason: "unspecified"},
		{host: "0", stand: "127.0.0.1", reason: "unspecified"},
		{host: "[::]", stand: "::1", reason: "unspecified"},
		{host: "0.1.2.3", reason: "unspecified"},
		// Cloud metadata in every spelling.
		{host: "169.254.169.254", reason: "metadata"},
		{host: "metadata.google.internal", reason: "metadata"},
		{host: "2852039166", reason: "metadata"},
		{host: "0xa9fea9fe", reason: "metadata"},
		{host: "0251.0376.0251.0376", reason: "metadata"},
		{host: "169.254.43518", reason: "metadata"},
		{host: "[::ffff:169.254.169.254]", reason: "metadata"},
		{host: "[::ffff:a9fe:a9fe]", reason: "metadata"},
		{host: "[64:ff9b::a9fe:a9fe]", reason: "metadata"},
		{host: "[2002:a9fe:a9fe::]", reason: "metadata"},
		{host: "[fd00:ec2::254]", reason: "metadata"},
		{host: "100.100.100.200", reason: "metadata"},
		{host: "168.63.129.16", reason: "metadata"},
		// Link-local, multicast, reserved.
		{host: "169.254.1.1", reason: "link_local"},
		{host: "[fe80::1]", reason: "link_local"},
		{host: "[fe80::1%25eth0]", reason: "link_local"},
		{host: "224.0.0.1", reason: "multicast"},
		{host: "[ff02::1]", reason: "multicast"},
		{host: "255.255.255.255", reason: "reserved"},
		{host: "240.0.0.1", reason: "reserved"},
		{host: "[2001::1]", reason: "reserved"}, // Teredo
		// Private ranges outside the allow-list.
		{host: "172.16.5.4", reason: "private"},
		{host: "192.168.1.1", reason: "private"},
		{host: "100.64.0.1", reason: "private"},
		{host: "[fc00::1]", reason: "private"},
		{host: "198.18.0.1", reason: "private"},
		{host: "192.0.2.1", reason: "private"},
		{host: "[::ffff:192.168.1.1]", reason: "private"},
		{host: "[64:ff9b::c0a8:101]", reason: "private"},
		{host: "private.example", reason: "private", tweak: noAllowList},
		{host: "10.0.0.1", reason: "private", tweak: noAllowList},
		// The cluster's own apiserver, although 10/8 is allow-listed.
		{host: "10.96.0.1", reason: "apiserver"},
		// Ports outside the bound set.
		{host: "public.example", reason: "port", tweak: func(p *Policy) { p.IP.Ports = []uint16{8443} }},
		{host: "127.0.0.1", stand: "127.0.0.1", reason: "port", tweak: allowLoopbackOtherPort},
		// Plain http with loopback allowed for development: only a loopback peer is accepted,
		// judged at dial time on the resolved address.
		{scheme: "http", host: "public.example", tweak: allowLoopback},
		{scheme: "http", host: "93.184.216.34", tweak: allowLoopback},
		{scheme: "http", host: "10.1.2.3", tweak: allowLoopback}, // allow-listed, still not loopback
		{scheme: "http", host: "[2606:2800:220:1::]", tweak: allowLoopback},
	}
}

// targetEnv stands one sink per loopback address of the table.
type targetEnv struct {
	sinks map[string]*sink
	res   *stubResolver
	hook  *hook
}

func newTargetEnv(t *testing.T) *targetEnv {
	e := &targetEnv{sinks: map[string]*sink{}, res: newStubResolver(), hook: &hook{}}
	for _, h := range []string{"127.0.0.1", "127.1.2.3", "127.255.255.254", "::1"} {
		e.sinks[h] = newSink(t, h)
	}
	return e
}

func (e *targetEnv) url(tg target) string {
	port := 443
	if tg.stand != "" {
		port = int(e.sinks[tg.stand].port())
	}
	scheme := tg.scheme
	if scheme == "" {
		scheme = "https"
	}
	return scheme + "://" + tg.host + ":" + strconv.Itoa(port) + "/mcp"
}

// exchange sends one POST through a port bound to the target itself, so only the dial-time
// check stands between the request and the address.
func (e *targetEnv) exchange(t *testing.T, tg target) error {
	t.Helper()
	p := hostedBase()
	if tg.tweak != nil {
		tg.tweak(&p)
	}
	u := e.url(tg)
	p.Endpoint = u
	p.Resolver = e.res
	tr, err := NewTransport(p)
	if err != nil {
		t.Fatalf("NewTransport(%s): %v", u, err)
	}
	tr.dialer.connect = e.hook.connect
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, u, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatalf("request %s: %v", u, err)
	}
	_, err = tr.Exchange(context.Background(), req)
	return err
}

// TestSSRFTargetsRefusedAtDial: every target is refused by the dial-time check with the right
// reason, no non-loopback address passes the check, and no sink receives a connection.
func TestSSRFTargetsRefusedAtDial(t *testing.T) {
	targets := ssrfTargets()
	if len(targets) < 40 {
		t.Fatalf("target list has %d entries, want at least 40", len(targets))
	}
	e := newTargetEnv(t)
	for _, tg := range targets {
		err := e.exchange(t, tg)
		if strings.Contains(fmt.Sprint(err), "/mcp") {
			t.Errorf("%s: error text carries the URL path: %v", tg.name(), err)
		}
		if tg.scheme == "http" {
			var se *SchemeError
			if !errors.As(err, &se) || se.Refusal() != RefusalScheme {
				t.Errorf("%s: got %v, want scheme_refused at dial time", tg.name(), err)
			}
			continue
		}
		var de *DestinationError
		if !errors.As(err, &de) {
			t.Errorf("%s: got %v, want destination_refused", tg.host, err)
			continue
		}
		if de.Refusal() != RefusalDestination || !errors.Is(err, ErrDestinationRefused) {
			t.Errorf("%s: refusal %q, want %q", tg.host, de.Refusal(), RefusalDestination)
		}
		if de.Reason != tg.reason {
			t.Errorf("%s: reason %q, want %q", tg.host, de.Reason, tg.reason)
		}
	}
	if l := e.hook.leaks(); len(l) > 0 {
		t.Errorf("non-loopback addresses passed the dial-time check: %v", l)
	}
	for h, s := range e.sinks {
		if n, b := s.settle(t); n != 0 || b != 0 {
			t.Errorf("sink %s received %d connections, %d bytes; want none", h, n, b)
		}
	}
}

// TestSSRFTargetsNeedDialCheck is the mutation twin: with the dial-time check removed from
// the net.Dialer, every single target gets through (a loopback sink accepts the connection,
// or the hook records a non-loopback address that would have been connected to). So the
// table above cannot pass without the check, and nothing here leaves loopback.
func TestSSRFTargetsNeedDialCheck(t *testing.T) {
	e := newTargetEnv(t)
	e.hook.removeCheck = true
	for _, tg := range ssrfTargets() {
		leaksBefore := len(e.hook.leaks())
		var acceptedBefore int
		if tg.stand != "" {
			acceptedBefore, _ = e.sinks[tg.stand].settle(t)
		}
		_ = e.exchange(t, tg)
		got := len(e.hook.leaks()) > leaksBefore
		if tg.stand != "" {
			n, _ := e.sinks[tg.stand].settle(t)
			// settle itself adds one marker per call.
			got = got || n-acceptedBefore > 1
		}
		if !got {
			t.Errorf("%s: not reached with the dial-time check removed; the table entry tests nothing", tg.name())
		}
	}
}

// TestPublicDestinationPassesCheck is the must-pass twin of the table: a public address (and
// an allow-listed private one) passes the dial-time check. The hook records them instead of
// connecting, so nothing is sent.
func TestPublicDestinationPassesCheck(t *testing.T) {
	e := newTargetEnv(t)
	for _, host := range []string{"public.example", "93.184.216.34", "[2606:2800:220:1::]", "private.example", "10.20.30.40", "[fd12::1]"} {
		before := len(e.hook.leaks())
		err := e.exchange(t, target{host: host})
		if !errors.Is(err, errRecorded) {
			t.Errorf("%s: got %v, want the dial to pass the check", host, err)
		}
		if len(e.hook.leaks()) != before+1 {
			t.Errorf("%s: hook did not record the dial", host)
		}
	}
}

// TestDNSRebinding: the resolver first answers a public address, then loopback. The second
// dial is judged on the loopback answer and refused; the sink at that address sees nothing.
func TestDNSRebinding(t *testing.T) {
	e := newTargetEnv(t)
	e.res.rebind["rebind.example"] = [][]netip.Addr{
		{netip.MustParseAddr("93.184.216.34")},
		{netip.MustParseAddr("127.0.0.1")},
	}
	tg := target{host: "rebind.example", stand: "127.0.0.1"}
	if err := e.exchange(t, tg); !errors.Is(err, errRecorded) {
		t.Fatalf("first answer (public): got %v, want the dial to pass the check", err)
	}
	err := e.exchange(t, tg)
	var de *DestinationError
	if !errors.As(err, &de) || de.Reason != "loopback" {
		t.Fatalf("second answer (loopback): got %v, want destination_refused (loopback)", err)
	}
	if n, b := e.sinks["127.0.0.1"].settle(t); n != 0 || b != 0 {
		t.Fatalf("sink received %d connections, %d bytes", n, b)
	}
}

// TestMixedAnswerDialsOnlyAllowedAddress: a name answering loopback and a public address
// is dialed only at the public one.
func TestMixedAnswerDialsOnlyAllowedAddress(t *testing.T) {
	e := newTargetEnv(t)
	err := e.exchange(t, target{host: "loopback-and-public.test", stand: "127.0.0.1"})
	var de *DestinationError
	if !errors.As(err, &de) || de.Reason != "loopback" {
		t.Fatalf("got %v, want the loopback refusal reported", err)
	}
	if l := e.hook.leaks(); len(l) != 1 || !strings.HasPrefix(l[0], "93.184.216.34:") {
		t.Fatalf("dialed %v, want only the public address", l)
	}
	if n, _ := e.sinks["127.0.0.1"].settle(t); n != 0 {
		t.Fatalf("loopback sink received %d connections", n)
	}
}

// TestDialerDirect exercises the exported Dialer on its own (as the OCI client would use it).
func TestDialerDirect(t *testing.T) {
	s := newSink(t, "127.0.0.1")
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(s.port())))
	d := NewDialer(IPPolicy{})
	_, err := d.DialContext(context.Background(), "tcp", addr)
	var de *DestinationError
	if !errors.As(err, &de) || de.Reason != "loopback" {
		t.Fatalf("hosted dial of %s: got %v, want loopback refusal", addr, err)
	}
	d = NewDialer(IPPolicy{Loopback: LoopbackAllowedUnsafe})
	c, err := d.DialContext(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatalf("development dial of %s: %v", addr, err)
	}
	_, _ = c.Write([]byte("x"))
	c.Close()
	if n, _ := s.settle(t); n != 1 {
		t.Fatalf("sink saw %d connections, want exactly the allowed one", n)
	}
	if _, err := d.DialContext(context.Background(), "udp", addr); !errors.Is(err, ErrDestinationRefused) {
		t.Fatalf("udp dial: got %v, want refusal", err)
	}
}
