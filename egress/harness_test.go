package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// This file holds the test harness that keeps every packet on loopback.
//
// Dials go through a connect hook (Dialer.connect). A resolved address whose kernel route is
// loopback (127.0.0.0/8, ::1, 0.0.0.0 and ::, which Linux delivers to the local host) is
// really dialed with the production net.Dialer (Control included), so a listener standing
// there proves that nothing was received. Any other address is never dialed: the hook runs the
// dialer's Control function itself and, when the check lets the address through, records a
// "leak" and fails the dial. So even with the dial-time check removed, nothing leaves loopback.

// errRecorded is returned by the hook instead of connecting to a non-loopback address.
var errRecorded = errors.New("test hook: non-loopback address recorded, not connected")

// standable reports whether a connect to ip stays on this host.
func standable(ip netip.Addr) bool {
	ip = ip.WithZone("").Unmap()
	return ip.IsLoopback() || ip.IsUnspecified()
}

// hook records non-loopback dials and really dials loopback ones.
type hook struct {
	mu sync.Mutex
	// leaked lists non-loopback "ip:port" addresses the Control check let through.
	leaked []string
	// removeCheck simulates a dialer without the dial-time check (mutation test).
	removeCheck bool
}

func (h *hook) connect(ctx context.Context, nd *net.Dialer, network, address string) (net.Conn, error) {
	if h.removeCheck {
		cp := *nd
		cp.Control = nil
		nd = &cp
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return nil, fmt.Errorf("test hook: unparsable %q", address)
	}
	if standable(ap.Addr()) {
		return nd.DialContext(ctx, network, address)
	}
	if nd.Control != nil {
		if err := nd.Control(network, address, nil); err != nil {
			return nil, &net.OpError{Op: "dial", Net: network, Err: err}
		}
	}
	h.mu.Lock()
	h.leaked = append(h.leaked, address)
	h.mu.Unlock()
	return nil, errRecorded
}

func (h *hook) leaks() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.leaked...)
}

// stubResolver answers like the system resolver could on a host whose C library accepts the
// inet_aton forms (decimal, octal, hex, short forms) for names, plus fixed names.
type stubResolver struct {
	mu      sync.Mutex
	names   map[string][]netip.Addr
	rebind  map[string][][]netip.Addr // successive answers
	lookups map[string]int
}

func newStubResolver() *stubResolver {
	return &stubResolver{
		names: map[string][]netip.Addr{
			"localhost":                {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")},
			"public.example":           {netip.MustParseAddr("93.184.216.34")},
			"metadata.google.internal": {netip.MustParseAddr("169.254.169.254")},
			"private.example":          {netip.MustParseAddr("10.1.2.3")},
			"loopback-and-public.test": {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("93.184.216.34")},
		},
		rebind:  map[string][][]netip.Addr{},
		lookups: map[string]int{},
	}
}

func (r *stubResolver) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := strings.ToLower(strings.TrimSuffix(host, "."))
	n := r.lookups[key]
	r.lookups[key]++
	var out []netip.Addr
	if seq, ok := r.rebind[key]; ok {
		out = seq[min(n, len(seq)-1)]
	} else if a, ok := r.names[key]; ok {
		out = a
	} else if a, ok := inetAton(key); ok {
		out = []netip.Addr{a}
	} else {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var filtered []netip.Addr
	for _, a := range out {
		if network == "ip" || network == "ip4" && a.Unmap().Is4() || network == "ip6" && a.Is6() && !a.Is4In6() {
			filtered = append(filtered, a)
		}
	}
	return filtered, nil
}

// inetAton parses the BSD inet_aton forms: 1 to 4 parts, each decimal, octal (leading 0)
// or hex (0x); the last part fills the remaining bytes.
func inetAton(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) == 0 || len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		if p == "" {
			return netip.Addr{}, false
		}
		v, err := strconv.ParseUint(p, 0, 32) // base 0: 0x hex, 0 octal
		if err != nil {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	var ip uint64
	last := len(vals) - 1
	for i := 0; i < last; i++ {
		if vals[i] > 255 {
			return netip.Addr{}, false
		}
		ip |= vals[i] << (24 - 8*uint(i))
	}
	if vals[last] >= 1<<(8*uint(4-last)) {
		return netip.Addr{}, false
	}
	ip |= vals[last]
	var b [4]byte
	for i := 3; i >= 0; i-- {
		b[i] = byte(ip & 0xff)
		ip >>= 8
	}
	return netip.AddrFrom4(b), true
}

// sink is a TCP listener that counts every accepted connection and received byte.
type sink struct {
	ln       net.Listener
	mu       sync.Mutex
	accepted int
	bytes    int64
	marks    chan struct{}
}

// newSink listens on host (a loopback address) at an ephemeral port.
func newSink(t *testing.T, host string) *sink {
	t.Helper()
	ln := listenTCP(t, host)
	s := &sink{ln: ln, marks: make(chan struct{}, 16)}
	go s.serve()
	t.Cleanup(func() { ln.Close() })
	return s
}

func (s *sink) port() uint16 { return s.ln.Addr().(*net.TCPAddr).AddrPort().Port() }

func (s *sink) serve() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.accepted++
		s.mu.Unlock()
		go func() {
			// Read what the client sends first, count it and hang up at once.
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(2 * time.Second))
			buf := make([]byte, 4096)
			n, _ := io.ReadAtLeast(c, buf, 1)
			if n >= 4 && string(buf[:4]) == "MARK" {
				s.marks <- struct{}{}
				return
			}
			s.mu.Lock()
			s.bytes += int64(n)
			s.mu.Unlock()
		}()
	}
}

// settle sends a marker connection and waits for it, so every earlier connection has been
// accepted; it then returns what the sink saw besides the marker.
func (s *sink) settle(t *testing.T) (accepted int, bytes int64) {
	t.Helper()
	c, err := (&net.Dialer{}).DialContext(context.Background(), "tcp", s.ln.Addr().String())
	if err != nil {
		t.Fatalf("marker dial: %v", err)
	}
	if _, err := io.WriteString(c, "MARK"); err != nil {
		t.Fatalf("marker write: %v", err)
	}
	c.Close()
	select {
	case <-s.marks:
	case <-time.After(10 * time.Second):
		t.Fatal("marker never arrived")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepted - 1, s.bytes
}
