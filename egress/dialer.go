package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
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

// Dialer is the guarded dialer: it resolves the host itself, then connects to each resolved
// address through a [net.Dialer] whose Control function is [IPPolicy.Control], so the policy is
// judged on the very address connect(2) would use — after DNS, after any redirect. A refused
// address is never connected to.
type Dialer struct {
	// Policy is the dial-time address policy.
	Policy IPPolicy
	// Resolver resolves host names; nil means [net.DefaultResolver].
	Resolver Resolver
	// Timeout bounds each connect; 0 means no bound beyond the context.
	Timeout time.Duration

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
	var refusal, last error
	for _, ip := range ips {
		ap := netip.AddrPortFrom(ip.Unmap(), uint16(port))
		conn, err := connect(ctx, nd, network, ap.String())
		if err == nil {
			return conn, nil
		}
		var de *DestinationError
		var se *SchemeError
		switch {
		case errors.As(err, &de):
			if refusal == nil {
				refusal = de
			}
		case errors.As(err, &se):
			if refusal == nil {
				refusal = se
			}
		default:
			last = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	if refusal != nil {
		return nil, refusal
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
