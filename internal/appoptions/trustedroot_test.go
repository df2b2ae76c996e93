package appoptions

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"k8s.io/client-go/rest"

	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/ociregistry"
	"github.com/b10x/connector-mcp/internal/ocitest"
)

// newTUFRepo starts a TUF repository serving target as trusted_root.json until the test ends.
func newTUFRepo(t *testing.T, target []byte) *ocitest.TUFRepo {
	t.Helper()
	r, err := ocitest.NewTUFRepo(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

func writeFile(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTrustedRootFromTUF: --trusted-root-tuf-url fetches trusted_root.json through the egress
// client from a TUF repository anchored in --trusted-root-tuf-root; an anchor of another
// repository is refused.
func TestTrustedRootFromTUF(t *testing.T) {
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatal(err)
	}
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01, vs.FulcioCertificateAuthorities(), nil, vs.TimestampingAuthorities(), nil)
	if err != nil {
		t.Fatal(err)
	}
	trJSON, err := tr.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	repo := newTUFRepo(t, trJSON)
	o := DefaultShared()
	o.AllowLoopbackUnsafe = true
	ip, err := o.IPPolicy(&rest.Config{Host: "https://10.0.0.1:6443"})
	if err != nil {
		t.Fatal(err)
	}
	hc, err := egress.NewHTTPClient(egress.Policy{IP: ip, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	o.TrustedRootTUFURL, o.TrustedRootTUFRootPath = repo.URL, writeFile(t, "root.json", repo.RootJSON)
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	got, err := o.loadTrustedRoot(hc)
	if err != nil {
		t.Fatal(err)
	}
	cas := got.FulcioCertificateAuthorities()
	want := vs.FulcioCertificateAuthorities()
	if len(cas) != 1 || !cas[0].(*root.FulcioCertificateAuthority).Root.Equal(want[0].(*root.FulcioCertificateAuthority).Root) {
		t.Fatalf("fetched %d certificate authorities, not the repository's", len(cas))
	}

	// Twin: the same repository under another repository's root.json is not trusted.
	other := newTUFRepo(t, trJSON)
	o.TrustedRootTUFRootPath = writeFile(t, "other-root.json", other.RootJSON)
	if _, err := o.loadTrustedRoot(hc); err == nil || !strings.Contains(err.Error(), "--trusted-root-tuf-url") {
		t.Fatalf("a repository not signed by the anchor's keys was trusted: %v", err)
	}
}

func TestTrustedRootOptionsValidate(t *testing.T) {
	for name, c := range map[string]struct {
		file, url, anchor string
		want              string
	}{
		"file and TUF":     {"tr.json", "https://tuf.example", "root.json", "at most one"},
		"TUF without root": {"", "https://tuf.example", "", "go together"},
		"root without TUF": {"", "", "root.json", "go together"},
	} {
		o := DefaultShared()
		o.TrustedRootPath, o.TrustedRootTUFURL, o.TrustedRootTUFRootPath = c.file, c.url, c.anchor
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Public-good Sigstore's repository needs no root.json: sigstore-go builds its root in.
	o := DefaultShared()
	o.TrustedRootTUFURL = ociregistry.PublicGoodTUFURL
	if err := o.Validate(); err != nil {
		t.Errorf("public-good TUF without a root: %v", err)
	}
}
