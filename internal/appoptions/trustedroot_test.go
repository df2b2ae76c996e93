package appoptions

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/theupdateframework/go-tuf/v2/metadata"
	"k8s.io/client-go/rest"

	"github.com/b10x/connector-mcp/egress"
)

// tufRepo is a real TUF repository (go-tuf metadata, ed25519-signed top-level roles, consistent
// snapshots) serving one target, trusted_root.json, over HTTP on loopback.
type tufRepo struct {
	files    map[string][]byte
	rootJSON []byte
	srv      *httptest.Server
}

func newTUFRepo(t *testing.T, target []byte) *tufRepo {
	t.Helper()
	expires := time.Now().AddDate(0, 0, 1).UTC()
	rt, tg, sn, ts := metadata.Root(expires), metadata.Targets(expires), metadata.Snapshot(expires), metadata.Timestamp(expires)
	keys := map[string]ed25519.PrivateKey{}
	for _, role := range []string{metadata.ROOT, metadata.TARGETS, metadata.SNAPSHOT, metadata.TIMESTAMP} {
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		keys[role] = priv
		k, err := metadata.KeyFromPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		if err := rt.Signed.AddKey(k, role); err != nil {
			t.Fatal(err)
		}
	}
	tf, err := metadata.TargetFile().FromBytes("trusted_root.json", target, "sha256")
	if err != nil {
		t.Fatal(err)
	}
	tg.Signed.Targets["trusted_root.json"] = tf
	sn.Signed.Meta["targets.json"] = metadata.MetaFile(tg.Signed.Version)
	ts.Signed.Meta["snapshot.json"] = metadata.MetaFile(sn.Signed.Version)
	signer := func(role string) signature.Signer {
		s, err := signature.LoadSigner(keys[role], crypto.Hash(0))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, sign := range []func() error{
		func() error { _, err := rt.Sign(signer(metadata.ROOT)); return err },
		func() error { _, err := tg.Sign(signer(metadata.TARGETS)); return err },
		func() error { _, err := sn.Sign(signer(metadata.SNAPSHOT)); return err },
		func() error { _, err := ts.Sign(signer(metadata.TIMESTAMP)); return err },
	} {
		if err := sign(); err != nil {
			t.Fatal(err)
		}
	}
	bytesOf := func(b []byte, err error) []byte {
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	sum := sha256.Sum256(target)
	r := &tufRepo{files: map[string][]byte{
		"/1.root.json":     bytesOf(rt.ToBytes(false)),
		"/1.targets.json":  bytesOf(tg.ToBytes(false)),
		"/1.snapshot.json": bytesOf(sn.ToBytes(false)),
		"/timestamp.json":  bytesOf(ts.ToBytes(false)),
		"/targets/" + hex.EncodeToString(sum[:]) + ".trusted_root.json": target,
	}}
	r.rootJSON = r.files["/1.root.json"]
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, ok := r.files[req.URL.Path]
		if !ok {
			http.NotFound(w, req)
			return
		}
		_, _ = w.Write(b)
	}))
	t.Cleanup(r.srv.Close)
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
	o.TrustedRootTUFURL, o.TrustedRootTUFRootPath = repo.srv.URL, writeFile(t, "root.json", repo.rootJSON)
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
	o.TrustedRootTUFRootPath = writeFile(t, "other-root.json", other.rootJSON)
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
}
