package appoptions

import (
	"io"
	"net/netip"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/b10x/connector-mcp/egress"
)

// TestRemovedRequireProvenanceFlag: the old flag, in any spelling, is refused with a message
// that names its unsafe successor.
func TestRemovedRequireProvenanceFlag(t *testing.T) {
	for _, arg := range []string{"--require-provenance=false", "--require-provenance=true", "--require-provenance"} {
		o := DefaultShared()
		fs := pflag.NewFlagSet("shared", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		o.BindFlags(fs)
		err := fs.Parse([]string{arg})
		if err == nil || !strings.Contains(err.Error(), "--skip-provenance-unsafe") {
			t.Fatalf("%s: %v", arg, err)
		}
	}
}

// TestIPPolicy: the allow-list opens private ranges but never the apiserver; loopback only with
// the development flag; the metadata address never.
func TestIPPolicy(t *testing.T) {
	cfg := &rest.Config{Host: "https://10.0.0.1:6443"}
	o := DefaultEgress()
	o.EgressAllowCIDRs = []string{"10.0.0.0/8"}
	p, err := o.IPPolicy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Check(netip.MustParseAddrPort("10.1.2.3:443")); err != nil {
		t.Fatalf("an allow-listed private address was refused: %v", err)
	}
	if err := p.Check(netip.MustParseAddrPort("10.0.0.1:6443")); err == nil {
		t.Fatal("the apiserver was reachable through the allow-list")
	}
	if err := p.Check(netip.MustParseAddrPort("127.0.0.1:8080")); err == nil {
		t.Fatal("loopback reachable without the development flag")
	}
	o.AllowLoopbackUnsafe = true
	p, err = o.IPPolicy(&rest.Config{Host: "https://127.0.0.1:6443"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Loopback != egress.LoopbackAllowedUnsafe {
		t.Fatalf("loopback mode = %v", p.Loopback)
	}
	if err := p.Check(netip.MustParseAddrPort("127.0.0.1:8080")); err != nil {
		t.Fatalf("loopback refused with the development flag: %v", err)
	}
	if err := p.Check(netip.MustParseAddrPort("169.254.169.254:80")); err == nil {
		t.Fatal("the metadata address was reachable")
	}
}
