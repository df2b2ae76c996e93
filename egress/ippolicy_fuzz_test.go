package egress

import (
	"errors"
	"net/netip"
	"testing"
)

func reasonOf(p IPPolicy, ip netip.Addr) string {
	var de *DestinationError
	if err := p.Check(netip.AddrPortFrom(ip, 443)); errors.As(err, &de) {
		return de.Reason
	}
	return ""
}

var alwaysRefused = map[string]bool{
	"metadata": true, "apiserver": true, "unspecified": true, "link_local": true, "multicast": true, "reserved": true,
}

// FuzzEmbeddedIPv4Forms: every IPv6 spelling that carries an IPv4 destination (mapped,
// compatible, NAT64, 6to4, SIIT IPv4-translated) is judged exactly like the IPv4 address itself, and an allow-list
// covering everything never opens an always-refused class.
func FuzzEmbeddedIPv4Forms(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "169.254.169.254", "10.96.0.1", "10.1.2.3", "93.184.216.34", "0.0.0.0", "224.0.0.1", "100.100.100.200", "192.168.1.1"} {
		a := netip.MustParseAddr(s).As4()
		f.Add(a[0], a[1], a[2], a[3])
	}
	p := IPPolicy{
		AllowCIDRs:   []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		DenyPrefixes: []netip.Prefix{netip.MustParsePrefix("10.96.0.1/32")},
	}
	open := p
	open.Loopback = LoopbackByCIDRUnsafe
	open.AllowCIDRs = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}
	f.Fuzz(func(t *testing.T, a, b, c, d byte) {
		v4 := netip.AddrFrom4([4]byte{a, b, c, d})
		want := reasonOf(p, v4)
		forms := map[string]netip.Addr{
			"mapped": netip.AddrFrom16([16]byte{10: 0xff, 11: 0xff, 12: a, 13: b, 14: c, 15: d}),
			"nat64":  netip.AddrFrom16([16]byte{0: 0x00, 1: 0x64, 2: 0xff, 3: 0x9b, 12: a, 13: b, 14: c, 15: d}),
			"6to4":   netip.AddrFrom16([16]byte{0: 0x20, 1: 0x02, 2: a, 3: b, 4: c, 5: d}),
			"siit":   netip.AddrFrom16([16]byte{8: 0xff, 9: 0xff, 12: a, 13: b, 14: c, 15: d}),
		}
		if compat := netip.AddrFrom16([16]byte{12: a, 13: b, 14: c, 15: d}); !compat.IsUnspecified() && !compat.IsLoopback() {
			forms["compatible"] = compat
		}
		for name, ip := range forms {
			if got := reasonOf(p, ip); got != want {
				t.Errorf("%s form %s of %s: reason %q, want %q", name, ip, v4, got, want)
			}
		}
		if alwaysRefused[want] {
			if got := reasonOf(open, v4); got != want {
				t.Errorf("%s: an allow-everything list changed %q to %q", v4, want, got)
			}
			for name, ip := range forms {
				if got := reasonOf(open, ip); got != want {
					t.Errorf("%s form %s: an allow-everything list changed %q to %q", name, ip, want, got)
				}
			}
		}
	})
}
