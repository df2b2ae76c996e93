package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Resolver looks up the addresses of a host name. [*net.Resolver] implements it; tests use a
// stub. network is "ip", "ip4" or "ip6".
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// maxDialAddrs bounds how many resolved addresses one dial tries.
const maxDialAddrs = 8

// Dialer is the guarded dialer: it resolves the host itself, then connects to the resolved
// addresses with Happy Eyeballs (RFC 8305: families interleaved, staggered attempts, first
// connection wins) through a [net.Dialer] whose Control function is [IPPolicy.Control], so the policy is
// judged on the very address connect(2) would use — after DNS, after any redirect. A refused
// address is never connected to.
type Dialer struct {
	// Policy is the dial-time address policy.
	Policy IPPolicy
	// Resolver resolves host names; nil means [net.DefaultResolver].
	Resolver Resolver
	// Deny, when set, is read for every dial; its prefixes are refused like
	// Policy.DenyPrefixes and a read error refuses the dial ("policy_unavailable").
	Deny DenySource
	// Timeout bounds each connect; 0 means no bound beyond the context.
	Timeout time.Duration
	// FallbackDelay is the Happy Eyeballs connection attempt delay: a host's next address is
	// tried when the current attempt has not connected within it (0: [DefaultFallbackDelay]).
	FallbackDelay time.Duration

	// connect dials one literal "ip:port" with nd; tests replace it to record instead of
	// connecting to addresses outside loopback. nil means nd.DialContext.
	connect func(ctx context.Context, nd *net.Dialer, network, address string) (net.Conn, error)
}

// NewDialer returns a guarded dialer for p using the default resolver.
func NewDialer(p IPPolicy) *Dialer { return &Dialer{Policy: p} }

type plainHTTPKey struct{}

// withPlainHTTP marks ctx as belonging to a plain-http request: the dialer then only accepts a
// loopback peer.
func withPlainHTTP(ctx context.Context) context.Context {
	return context.WithValue(ctx, plainHTTPKey{}, true)
}

// DialContext connects to address ("host:port") on a tcp network after judging every
// resolved address with the policy at dial time. It returns a [*DestinationError] (or a
// [*SchemeError]) when the policy refuses the destination; nothing is sent to a refused
// address.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	var ipNet string
	switch network {
	case "tcp":
		ipNet = "ip"
	case "tcp4":
		ipNet = "ip4"
	case "tcp6":
		ipNet = "ip6"
	default:
		return nil, &DestinationError{Addr: address, Reason: "invalid"}
	}
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return nil, &DestinationError{Addr: address, Reason: "invalid"}
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || port == 0 {
		return nil, &DestinationError{Addr: address, Reason: "port"}
	}
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else {
		if !validHostName(host) {
			return nil, &DestinationError{Addr: address, Reason: "invalid"}
		}
		r := d.Resolver
		if r == nil {
			r = net.DefaultResolver
		}
		ips, err = r.LookupNetIP(ctx, ipNet, host)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, &DestinationError{Addr: address, Reason: "resolve"}
		}
		if len(ips) == 0 {
			return nil, &DestinationError{Addr: address, Reason: "resolve"}
		}
	}
	if len(ips) > maxDialAddrs {
		ips = ips[:maxDialAddrs]
	}
	pol := d.Policy
	if d.Deny != nil {
		deny, err := d.Deny.Deny(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, &DestinationError{Addr: address, Reason: "policy_unavailable"}
		}
		pol.DenyPrefixes = append(slices.Clone(pol.DenyPrefixes), deny...)
	}
	if v, _ := ctx.Value(plainHTTPKey{}).(bool); v {
		pol.plainHTTP = true
	}
	nd := &net.Dialer{Timeout: d.Timeout, Control: pol.Control}
	connect := d.connect
	if connect == nil {
		connect = func(ctx context.Context, nd *net.Dialer, network, address string) (net.Conn, error) {
			return nd.DialContext(ctx, network, address)
		}
	}
	addrs := make([]string, 0, len(ips))
	for _, ip := range interleave(ips) {
		addrs = append(addrs, netip.AddrPortFrom(ip.Unmap(), uint16(port)).String())
	}
	delay := d.FallbackDelay
	if delay <= 0 {
		delay = DefaultFallbackDelay
	}
	return raceDial(ctx, addrs, delay, func(ctx context.Context, addr string) (net.Conn, error) {
		return connect(ctx, nd, network, addr)
	})
}

// DefaultFallbackDelay is the Happy Eyeballs connection attempt delay (RFC 8305 section 5):
// how long one connection attempt runs alone before the next address is tried beside it.
const DefaultFallbackDelay = 250 * time.Millisecond

// interleave orders resolved addresses the Happy Eyeballs way (RFC 8305 section 4): the two
// families alternate, starting with the family of the first answer; order within a family is
// kept.
func interleave(ips []netip.Addr) []netip.Addr {
	if len(ips) < 2 {
		return ips
	}
	first := ips[0].Unmap().Is4()
	var a, b []netip.Addr
	for _, ip := range ips {
		if ip.Unmap().Is4() == first {
			a = append(a, ip)
		} else {
			b = append(b, ip)
		}
	}
	out := make([]netip.Addr, 0, len(ips))
	for i := 0; i < len(a) || i < len(b); i++ {
		if i < len(a) {
			out = append(out, a[i])
		}
		if i < len(b) {
			out = append(out, b[i])
		}
	}
	return out
}

// dialResult is the outcome of one connection attempt of raceDial.
type dialResult struct {
	conn net.Conn
	err  error
	i    int
}

// raceDial connects to one of addrs with Happy Eyeballs: an attempt starts at once, the next
// one when the previous has failed or after delay, whichever comes first; the first connection
// wins, every other attempt is cancelled and a late connection is closed. Each attempt is judged
// by the dial-time policy on its own (dial runs the policy's Control). A blackholed address
// therefore costs delay, not the whole deadline. On failure the first policy refusal (in
// address order) is returned, else the last other error.
func raceDial(ctx context.Context, addrs []string, delay time.Duration, dial func(context.Context, string) (net.Conn, error)) (net.Conn, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan dialResult, len(addrs))
	errs := make([]error, len(addrs))
	next, pending := 0, 0
	start := func() {
		i := next
		next++
		pending++
		go func() {
			c, err := dial(ctx, addrs[i])
			results <- dialResult{conn: c, err: err, i: i}
		}()
	}
	// drain closes connections that win after the race is decided.
	drain := func(n int) {
		if n == 0 {
			return
		}
		go func() {
			for ; n > 0; n-- {
				if r := <-results; r.conn != nil {
					_ = r.conn.Close()
				}
			}
		}()
	}
	start()
	timer := time.NewTimer(delay)
	defer timer.Stop()
	for pending > 0 {
		select {
		case r := <-results:
			pending--
			if r.err == nil {
				drain(pending)
				return r.conn, nil
			}
			errs[r.i] = r.err
			if next < len(addrs) {
				start()
				timer.Reset(delay)
			}
		case <-timer.C:
			if next < len(addrs) {
				start()
				timer.Reset(delay)
			}
		case <-ctx.Done():
			drain(pending)
			return nil, ctx.Err()
		}
	}
	var last error
	for _, err := range errs {
		var de *DestinationError
		var se *SchemeError
		switch {
		case errors.As(err, &de):
			return nil, de
		case errors.As(err, &se):
			return nil, se
		case err != nil:
			last = err
		}
	}
	return nil, last
}

// validHostName accepts DNS names (letters, digits, '-', '_', '.'), nothing else.
func validHostName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(h, "."), ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			switch {
			case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
			default:
				return false
			}
		}
	}
	return true
}
