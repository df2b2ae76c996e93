package egress

import (
	"fmt"
	"net/netip"
	"syscall"
)

// LoopbackMode says how an [IPPolicy] treats loopback destinations (127.0.0.0/8, ::1).
type LoopbackMode int

const (
	// LoopbackDenied refuses every loopback destination. It is the zero value and the hosted
	// (operator) mode.
	LoopbackDenied LoopbackMode = iota
	// LoopbackAllowedUnsafe allows every loopback destination. Development only (mcpctl
	// --allow-loopback); it also allows plain http to loopback.
	LoopbackAllowedUnsafe
	// LoopbackByCIDRUnsafe treats loopback like a private range: reachable only through an
	// explicit entry of [IPPolicy.AllowCIDRs]. Tests use it to stand an "in-cluster" server
	// on one 127.0.0.x alias while every other loopback address stays refused.
	LoopbackByCIDRUnsafe
)

// IPPolicy is the dial-time address policy. It is judged on the address a socket is about to
// connect to (see [IPPolicy.Control]), never on URL text.
//
// Always refused, whatever the allow-list says: unspecified (0.0.0.0/8, ::), link-local
// (169.254.0.0/16, fe80::/10), multicast, reserved (240.0.0.0/4, broadcast, Teredo), cloud
// metadata (169.254.169.254, 169.254.170.2, 169.254.0.23, fd00:ec2::/64, fd20:ce::254,
// 100.100.100.200, 168.63.129.16) and every prefix of DenyPrefixes (the cluster's apiserver
// addresses and Service CIDRs). Loopback is refused unless Loopback says otherwise. Private and
// the other non-global entries of the IANA IPv4 and IPv6 special-purpose registries (10/8,
// 172.16/12, 192.168/16, 100.64/10, 192.0.0/24, 198.18/15, the documentation ranges including
// 3fff::/20, fc00::/7, fec0::/10, 2001::/23, 5f00::/16, 64:ff9b:1::/48, ...) are refused unless
// an AllowCIDRs entry contains the address. IPv4-mapped (::ffff:0:0/96), SIIT IPv4-translated
// (::ffff:0:0:0/96), IPv4-compatible, NAT64 (64:ff9b::/96) and 6to4 (2002::/16) addresses are
// judged on the embedded IPv4 address, so a NAT64 form of a denied IPv4 address is denied.
type IPPolicy struct {
	// AllowCIDRs lists the private prefixes that may be reached (e.g. an in-cluster service
	// range). It never unlocks metadata, link-local, unspecified, multicast, reserved or
	// denied addresses.
	AllowCIDRs []netip.Prefix
	// DenyPrefixes lists addresses that are always refused, typically the cluster's own
	// apiserver (see [APIServerPrefixes]).
	DenyPrefixes []netip.Prefix
	// Ports, when not empty, is the set of destination ports that may be dialed.
	Ports []uint16
	// Loopback says how loopback destinations are treated; the zero value refuses them.
	Loopback LoopbackMode

	// plainHTTP marks a dial for a plain-http request: the peer must then be loopback.
	plainHTTP bool
}

var (
	// metadataPrefixes are the cloud instance-metadata and platform endpoints: always refused,
	// even when an allow-list entry (e.g. fd00::/8) would contain them.
	metadataPrefixes = []netip.Prefix{
		netip.MustParsePrefix("169.254.169.254/32"), // AWS, GCP, Azure, OpenStack, Oracle, DigitalOcean IMDS
		netip.MustParsePrefix("169.254.170.2/32"),   // AWS ECS task metadata
		netip.MustParsePrefix("169.254.0.23/32"),    // Tencent Cloud metadata
		netip.MustParsePrefix("fd00:ec2::/64"),      // AWS IMDS, DNS and time over IPv6 (fd00:ec2::254 ...)
		netip.MustParsePrefix("fd20:ce::254/128"),   // GCP metadata over IPv6
		netip.MustParsePrefix("100.100.100.200/32"), // Alibaba Cloud
		netip.MustParsePrefix("168.63.129.16/32"),   // Azure WireServer
	}
	unspecified4 = netip.MustParsePrefix("0.0.0.0/8")
	linkLocal4   = netip.MustParsePrefix("169.254.0.0/16")
	reserved4    = netip.MustParsePrefix("240.0.0.0/4") // includes 255.255.255.255
	nat64        = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour    = netip.MustParsePrefix("2002::/16")
	v4compat     = netip.MustParsePrefix("::/96")
	// v4translated is SIIT's IPv4-translated form ::ffff:0:a.b.c.d (RFC 2765); the IPv4-mapped
	// form ::ffff:a.b.c.d is unmapped before judging.
	v4translated = netip.MustParsePrefix("::ffff:0:0:0/96")
	teredo       = netip.MustParsePrefix("2001::/32")
	// nonGlobal holds the IANA IPv4 and IPv6 special-purpose address registries' entries that
	// are not globally reachable (and the private ranges), beyond the classes judged by name.
	nonGlobal = []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("172.16.0.0/12"),
		netip.MustParsePrefix("192.168.0.0/16"),
		netip.MustParsePrefix("100.64.0.0/10"), // CGNAT
		netip.MustParsePrefix("192.0.0.0/24"),  // IETF protocol assignments (DS-Lite, NAT64 discovery, ...)
		netip.MustParsePrefix("192.0.2.0/24"),  // TEST-NET-1
		netip.MustParsePrefix("198.18.0.0/15"), // benchmarking
		netip.MustParsePrefix("198.51.100.0/24"),
		netip.MustParsePrefix("203.0.113.0/24"),
		netip.MustParsePrefix("192.88.99.0/24"),    // deprecated 6to4 relay anycast
		netip.MustParsePrefix("192.31.196.0/24"),   // AS112-v4
		netip.MustParsePrefix("192.52.193.0/24"),   // AMT
		netip.MustParsePrefix("192.175.48.0/24"),   // AS112 direct delegation
		netip.MustParsePrefix("fc00::/7"),          // ULA
		netip.MustParsePrefix("fec0::/10"),         // deprecated site-local
		netip.MustParsePrefix("2001:db8::/32"),     // documentation
		netip.MustParsePrefix("3fff::/20"),         // documentation (RFC 9637)
		netip.MustParsePrefix("100::/64"),          // discard-only
		netip.MustParsePrefix("100:0:0:1::/64"),    // dummy IPv6 prefix (RFC 9780)
		netip.MustParsePrefix("64:ff9b:1::/48"),    // local-use NAT64
		netip.MustParsePrefix("2001::/23"),         // IETF protocol assignments: Teredo, benchmarking, ORCHID(v2), AMT, AS112-v6, DRIP
		netip.MustParsePrefix("2620:4f:8000::/48"), // AS112 direct delegation
		netip.MustParsePrefix("5f00::/16"),         // SRv6 SIDs (RFC 9602)
	}
)

// Control is a [net.Dialer] Control function: it judges the address the socket is about to
// connect to and returns a [*DestinationError] (or a [*SchemeError] for a plain-http dial to a
// non-loopback peer) before connect(2) is issued. The raw connection is not used.
func (p IPPolicy) Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &DestinationError{Addr: address, Reason: "invalid"}
	}
	if err := p.Check(ap); err != nil {
		return err
	}
	if p.plainHTTP && !isLoopback(ap.Addr()) {
		return &SchemeError{Scheme: "http", Reason: "plain http reaches loopback only"}
	}
	return nil
}

// Check judges one destination address and port; it returns nil or a [*DestinationError].
func (p IPPolicy) Check(ap netip.AddrPort) error {
	if reason := p.judge(ap.Addr(), 0); reason != "" {
		return &DestinationError{Addr: ap.String(), Reason: reason}
	}
	if len(p.Ports) > 0 {
		ok := false
		for _, port := range p.Ports {
			if port == ap.Port() {
				ok = true
				break
			}
		}
		if !ok {
			return &DestinationError{Addr: ap.String(), Reason: "port"}
		}
	}
	return nil
}

// Validate reports whether the policy is usable: every prefix valid.
func (p IPPolicy) Validate() error {
	for _, set := range [][]netip.Prefix{p.AllowCIDRs, p.DenyPrefixes} {
		for _, pfx := range set {
			if !pfx.IsValid() {
				return fmt.Errorf("%w: invalid prefix %q", ErrInvalidPolicy, pfx)
			}
		}
	}
	if p.Loopback < LoopbackDenied || p.Loopback > LoopbackByCIDRUnsafe {
		return fmt.Errorf("%w: unknown loopback mode %d", ErrInvalidPolicy, p.Loopback)
	}
	return nil
}

// judge returns the refusal reason for ip, or "" when it may be dialed.
func (p IPPolicy) judge(ip netip.Addr, depth int) string {
	if !ip.IsValid() {
		return "invalid"
	}
	ip = ip.WithZone("").Unmap()
	if ip.Is6() && depth == 0 {
		// Addresses that carry an IPv4 destination are judged on it.
		b := ip.As16()
		switch {
		case nat64.Contains(ip), v4translated.Contains(ip), v4compat.Contains(ip) && !ip.IsUnspecified() && !ip.IsLoopback():
			return p.judge(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), 1)
		case sixToFour.Contains(ip):
			return p.judge(netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), 1)
		case teredo.Contains(ip):
			return "reserved"
		}
	}
	if prefixesContain(metadataPrefixes, ip) {
		return "metadata"
	}
	if prefixesContain(p.DenyPrefixes, ip) {
		return "apiserver"
	}
	switch {
	case ip.IsUnspecified() || unspecified4.Contains(ip):
		return "unspecified"
	case ip.IsLoopback():
		switch p.Loopback {
		case LoopbackAllowedUnsafe:
			return ""
		case LoopbackByCIDRUnsafe:
			if prefixesContain(p.AllowCIDRs, ip) {
				return ""
			}
		}
		return "loopback"
	case ip.IsLinkLocalUnicast() || linkLocal4.Contains(ip):
		return "link_local"
	case ip.IsMulticast() || ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast():
		return "multicast"
	case reserved4.Contains(ip):
		return "reserved"
	}
	if ip.IsPrivate() || prefixesContain(nonGlobal, ip) {
		if prefixesContain(p.AllowCIDRs, ip) {
			return ""
		}
		return "private"
	}
	return ""
}

func prefixesContain(set []netip.Prefix, ip netip.Addr) bool {
	for _, pfx := range set {
		if pfx.Contains(ip) {
			return true
		}
		// A prefix written in IPv4-mapped form covers the plain IPv4 address too.
		if a := pfx.Addr(); a.Is4In6() && pfx.Bits() >= 96 && ip.Is4() {
			if netip.PrefixFrom(a.Unmap(), pfx.Bits()-96).Contains(ip) {
				return true
			}
		}
	}
	return false
}

func isLoopback(ip netip.Addr) bool { return ip.WithZone("").Unmap().IsLoopback() }

// ParseCIDRs parses allow-list entries such as "10.0.0.0/8" or a single address "10.1.2.3"
// (taken as /32 or /128).
func ParseCIDRs(entries []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(entries))
	for _, e := range entries {
		if pfx, err := netip.ParsePrefix(e); err == nil {
			out = append(out, pfx.Masked())
			continue
		}
		ip, err := netip.ParseAddr(e)
		if err != nil {
			return nil, fmt.Errorf("%w: %q is neither a CIDR nor an address", ErrInvalidPolicy, e)
		}
		out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
	}
	return out, nil
}

// APIServerPrefixes returns the single-address prefixes of the in-cluster apiserver as seen by
// a pod (the KUBERNETES_SERVICE_HOST variable read through getenv) plus any extra endpoint
// addresses given, for use as [IPPolicy.DenyPrefixes]. Unparseable entries are skipped.
func APIServerPrefixes(getenv func(string) string, endpoints ...string) []netip.Prefix {
	var addrs []string
	if getenv != nil {
		if h := getenv("KUBERNETES_SERVICE_HOST"); h != "" {
			addrs = append(addrs, h)
		}
	}
	addrs = append(addrs, endpoints...)
	var out []netip.Prefix
	for _, a := range addrs {
		if ip, err := netip.ParseAddr(a); err == nil {
			ip = ip.WithZone("").Unmap()
			out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
		}
	}
	return out
}
