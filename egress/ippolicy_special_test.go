package egress

import (
	"net/netip"
	"testing"
)

// TestSpecialPurposeRegistries: the cloud metadata addresses (IPv6 included) are refused even
// under an allow-everything list; the non-global IANA special-purpose entries are refused as
// private unless allowed; a NAT64 or SIIT spelling of a denied IPv4 address is denied. Twins: a
// global address next to each range passes.
func TestSpecialPurposeRegistries(t *testing.T) {
	closed := IPPolicy{DenyPrefixes: []netip.Prefix{netip.MustParsePrefix("203.0.113.9/32"), netip.MustParsePrefix("10.96.0.0/12")}}
	open := closed
	open.AllowCIDRs = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}
	for _, c := range []struct {
		addr           string
		closed, opened string
	}{
		{"fd00:ec2::254", "metadata", "metadata"},
		{"fd00:ec2::123", "metadata", "metadata"},
		{"fd20:ce::254", "metadata", "metadata"},
		{"169.254.170.2", "metadata", "metadata"},
		{"::ffff:169.254.169.254", "metadata", "metadata"},
		{"::ffff:0:169.254.169.254", "metadata", "metadata"},
		{"64:ff9b::169.254.169.254", "metadata", "metadata"},
		{"64:ff9b::a9fe:a9fe", "metadata", "metadata"},
		{"3fff::1", "private", ""},
		{"5f00::1", "private", ""},
		{"2001:1::1", "private", ""},
		{"2001:30::1", "private", ""},
		{"100:0:0:1::1", "private", ""},
		{"192.31.196.1", "private", ""},
		{"fd20:ce::253", "private", ""},
		{"64:ff9b::203.0.113.9", "apiserver", "apiserver"},
		{"::ffff:0:10.96.0.1", "apiserver", "apiserver"},
		// Twins: global neighbours pass.
		{"2606:4700::1", "", ""},
		{"4000::1", "", ""},
		{"5f01::1", "", ""},
		{"93.184.216.34", "", ""},
		{"64:ff9b::93.184.216.34", "", ""},
	} {
		ip := netip.MustParseAddr(c.addr)
		if got := reasonOf(closed, ip); got != c.closed {
			t.Errorf("%s under the default policy: reason %q, want %q", c.addr, got, c.closed)
		}
		if got := reasonOf(open, ip); got != c.opened {
			t.Errorf("%s under an allow-everything list: reason %q, want %q", c.addr, got, c.opened)
		}
	}
}
