package appoptions

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/activation"
	"github.com/b10x/connector-mcp/internal/ociregistry"
	"github.com/b10x/connector-mcp/internal/ocitest"
	"github.com/b10x/connector-mcp/ocipack"
	"github.com/b10x/connector-mcp/snapshot"
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

// countingTransport counts the requests of a client and fails each: a client that must not be
// used.
type countingTransport struct {
	mu    sync.Mutex
	count int
}

func (c *countingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count++
	return nil, errors.New("countingTransport: no request may be sent")
}

func (c *countingTransport) n() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.count
}

// TestKeylessTrustDefaultIsPublicGoodOverTUF: with no trust flag the keyless trusted root is
// public-good Sigstore's TUF repository, anchored in the root built into sigstore-go, and
// building it sends nothing (the client it would fetch through counts every request). Twins:
// --trusted-root FILE and --trusted-root-tuf-url URL with its root override it, and
// --trusted-root-tuf-url=none turns keyless off.
func TestKeylessTrustDefaultIsPublicGoodOverTUF(t *testing.T) {
	if ociregistry.PublicGoodTUFURL != "https://tuf-repo-cdn.sigstore.dev" {
		t.Fatalf("public-good TUF repository %q", ociregistry.PublicGoodTUFURL)
	}
	o := DefaultShared()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := o.KeylessTrust(); got != (KeylessTrust{Kind: KeylessTrustTUF, URL: ociregistry.PublicGoodTUFURL}) {
		t.Fatalf("default keyless trust %+v", got)
	}
	ct := &countingTransport{}
	trusted, src, err := o.trustedRoot(&http.Client{Transport: ct})
	if err != nil || trusted != nil || src == nil || src.URL() != ociregistry.PublicGoodTUFURL || !src.BuiltInAnchor() {
		t.Fatalf("default: %v, %v, %v", trusted, src, err)
	}
	if ct.n() != 0 || src.Fetches() != 0 {
		t.Fatalf("building the default trusted root sent %d requests (%d fetches)", ct.n(), src.Fetches())
	}

	_, trJSON := virtualRoot(t)
	o.TrustedRootPath = writeFile(t, "trusted_root.json", trJSON)
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	trusted, src, err = o.trustedRoot(&http.Client{Transport: ct})
	if err != nil || trusted == nil || src != nil || o.KeylessTrust().Kind != KeylessTrustFile {
		t.Fatalf("--trusted-root: %v, %v, %v", trusted, src, err)
	}

	o = DefaultShared()
	repo := newTUFRepo(t, trJSON)
	o.TrustedRootTUFURL, o.TrustedRootTUFRootPath = repo.URL, writeFile(t, "root.json", repo.RootJSON)
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, src, err = o.trustedRoot(&http.Client{Transport: ct}); err != nil || src == nil || src.URL() != repo.URL || src.BuiltInAnchor() {
		t.Fatalf("--trusted-root-tuf-url: %v, %v", src, err)
	}

	o = DefaultShared()
	o.TrustedRootTUFURL = TrustedRootTUFNone
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if trusted, src, err = o.trustedRoot(&http.Client{Transport: ct}); err != nil || trusted != nil || src != nil || o.KeylessTrust().Kind != KeylessTrustNone {
		t.Fatalf("none: %v, %v, %v", trusted, src, err)
	}
	if ct.n() != 0 || repo.Requests() != 0 {
		t.Fatalf("resolving the keyless trust sent %d requests, the repository saw %d", ct.n(), repo.Requests())
	}
}

func TestTrustedRootOptionsValidate(t *testing.T) {
	for name, c := range map[string]struct {
		file, url, anchor string
		want              string
	}{
		"file and TUF":         {"tr.json", "https://tuf.example", "root.json", "at most one"},
		"file and none":        {"tr.json", TrustedRootTUFNone, "", "at most one"},
		"TUF without root":     {"", "https://tuf.example", "", "go together"},
		"root without TUF":     {"", "", "root.json", "go together"},
		"root with none":       {"", TrustedRootTUFNone, "root.json", "go together"},
		"plain http off host":  {"", "http://tuf.example", "root.json", "https URL"},
		"userinfo":             {"", "https://u:p@tuf.example", "root.json", "no user information"},
		"query":                {"", "https://tuf.example/?token=x", "root.json", "no user information"},
		"relative":             {"", "tuf.example", "root.json", "absolute"},
		"public-good with key": {"tr.json", ociregistry.PublicGoodTUFURL, "", "at most one"},
	} {
		o := DefaultShared()
		o.TrustedRootPath, o.TrustedRootTUFURL, o.TrustedRootTUFRootPath = c.file, c.url, c.anchor
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Public-good Sigstore's repository needs no root.json: sigstore-go builds its root in; a
	// loopback repository may be plain http (development).
	for _, url := range []string{ociregistry.PublicGoodTUFURL, TrustedRootTUFNone} {
		o := DefaultShared()
		o.TrustedRootTUFURL = url
		if err := o.Validate(); err != nil {
			t.Errorf("%s without a root: %v", url, err)
		}
	}
	o := DefaultShared()
	o.TrustedRootTUFURL, o.TrustedRootTUFRootPath = "http://127.0.0.1:8080", "root.json"
	if err := o.Validate(); err != nil {
		t.Errorf("loopback http: %v", err)
	}
}

// virtualRoot is a VirtualSigstore and the trusted_root.json of its Fulcio CA and TSA.
func virtualRoot(t *testing.T) (*ca.VirtualSigstore, []byte) {
	t.Helper()
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatal(err)
	}
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01, vs.FulcioCertificateAuthorities(), nil, vs.TimestampingAuthorities(), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := tr.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return vs, b
}

const (
	testIssuer   = "https://token.actions.example.com"
	testSubject  = "https://github.com/acme/profiles/.github/workflows/pack.yml@refs/heads/main"
	testRepo     = "git+https://github.com/acme/profiles"
	testRef      = "refs/heads/main"
	testRevision = "4f2a9c1e0b7d"
)

// packs is a loopback registry with one reviewed pack signed by a key and another signed keyless
// by kca (its certificate certifying testRepo's main branch, timestamped by its TSA, never
// logged), both with provenance from testRepo's main branch.
type packs struct {
	keyRef, keylessRef string
	keyPath            string
}

type staticCert []byte

func (c staticCert) GetCertificate(context.Context, sign.Keypair, *sign.CertificateProviderOptions) ([]byte, error) {
	return c, nil
}

func newPacks(t *testing.T, kca *ocitest.KeylessCA) *packs {
	t.Helper()
	ctx := context.Background()
	reg := ocitest.New(ocitest.Options{Referrers: true})
	t.Cleanup(reg.Close)
	snap, err := snapshot.New("2026-07-28", snapshot.ServerInfo{Name: "acme", Version: "1"}, []json.RawMessage{
		json.RawMessage(`{"name":"list_issues","inputSchema":{"type":"object"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	doc := ocipack.Draft(snap)
	doc.Operations[0].Effect = v1.EffectRead
	c := &ociregistry.Client{PlainHTTP: true}
	prov := &ociregistry.Provenance{SourceRepository: testRepo, SourceRef: testRef, SourceRevision: testRevision}
	push := func(repo string) ociregistry.Reference {
		r, err := ociregistry.ParseRepository(reg.Host + "/" + repo)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := c.Push(ctx, r, []*v1.ProfileDocument{doc})
		if err != nil {
			t.Fatal(err)
		}
		return ref
	}
	p := &packs{}
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ociregistry.NewKeypair(priv)
	if err != nil {
		t.Fatal(err)
	}
	keyRef := push("team/key")
	if _, err := (&ociregistry.Signer{Keypair: kp}).Sign(ctx, c, keyRef, prov); err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	p.keyPath = writeFile(t, "platform.pub", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	p.keyRef = keyRef.String()

	leaf, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := kca.Certificate(&leaf.PublicKey, ocitest.CertifiedIdentity{Subject: testSubject, Issuer: testIssuer,
		RepositoryURI: strings.TrimPrefix(testRepo, "git+"), Ref: testRef, RevisionDigest: testRevision})
	if err != nil {
		t.Fatal(err)
	}
	lkp, err := ociregistry.NewKeypair(leaf)
	if err != nil {
		t.Fatal(err)
	}
	keylessRef := push("team/keyless")
	s := &ociregistry.Signer{Keypair: lkp, CertificateProvider: staticCert(raw),
		Timestamp: func(_ context.Context, sig []byte) ([]byte, error) { return kca.Timestamp(sig) }}
	if _, err := s.Sign(ctx, c, keylessRef, prov); err != nil {
		t.Fatal(err)
	}
	p.keylessRef = keylessRef.String()
	return p
}

// resolver builds o's resolver as the manager does (o.NewResolver), dialing loopback only.
func resolver(t *testing.T, o Shared) *activation.Resolver {
	t.Helper()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	ip, err := o.IPPolicy(&rest.Config{Host: "https://10.0.0.1:6443"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := o.NewResolver(ResolverInputs{IP: ip, Deny: egress.DenyFunc(func(context.Context) ([]netip.Prefix, error) { return nil, nil })})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var profileUID int

func profile(ref string) *v1.McpServiceProfile {
	profileUID++
	return &v1.McpServiceProfile{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "p", UID: types.UID(strings.Repeat("u", profileUID)), Generation: 1},
		Spec: v1.McpServiceProfileSpec{Source: v1.ProfileSource{OCI: &v1.OCISource{Ref: ref}}}}
}

// platform trusts the key of p and the keyless testSubject, with provenance from testRepo's main
// branch, accepting keyless packs that were never logged (the test CA has no log).
func platform(o *Shared, p *packs) {
	o.AllowLoopbackUnsafe = true
	o.DefaultPublicKeyPath = p.keyPath
	o.DefaultIssuer, o.DefaultSubject = testIssuer, testSubject
	o.DefaultSourceRepository, o.DefaultSourceRef = testRepo, testRef
	o.KeylessWithoutTlogUnsafe = true
}

// TestDefaultManagerFetchesTheTrustedRootOnlyForKeyless: a manager with the default keyless trust
// (public-good Sigstore over TUF) verifies a key-signed pack without fetching anything; the first
// keyless pack starts a fetch from public-good Sigstore's repository, refused here before it
// dials (a test never reaches it), and that is a retried TrustedRootUnavailable naming only the
// cause. Twin: pointed at a local TUF repository the same keyless pack verifies, the trusted root
// is fetched once and kept for the next profile; with the repository down the refusal is
// TrustedRootUnavailable again, with the repository's status and nothing it said.
func TestDefaultManagerFetchesTheTrustedRootOnlyForKeyless(t *testing.T) {
	ctx := context.Background()
	kca, err := ocitest.NewKeylessCA()
	if err != nil {
		t.Fatal(err)
	}
	trJSON := kca.TrustedRootJSON
	p := newPacks(t, kca)

	o := DefaultShared()
	platform(&o, p)
	var mu sync.Mutex
	var fetched []string
	o.BeforeTrustedRootFetch = func(url string) error {
		mu.Lock()
		defer mu.Unlock()
		fetched = append(fetched, url)
		return errors.New("this test reaches no repository off loopback")
	}
	r := resolver(t, o)
	if _, serr := r.Resolve(ctx, profile(p.keyRef)); serr != nil {
		t.Fatalf("key-signed pack: %v", serr)
	}
	if len(fetched) != 0 {
		t.Fatalf("a key-signed pack fetched the trusted root from %v", fetched)
	}
	_, serr := r.Resolve(ctx, profile(p.keylessRef))
	if serr == nil || serr.Reason() != v1.ReasonTrustedRootUnavailable || !serr.Transient() ||
		!strings.Contains(serr.Message(), "trusted_root_unavailable: fetch_refused") || !errors.Is(serr, ocipack.ErrTrustedRootUnavailable) {
		t.Fatalf("keyless pack, default trust: %v", serr)
	}
	if len(fetched) != 1 || fetched[0] != ociregistry.PublicGoodTUFURL {
		t.Fatalf("the keyless pack fetched from %v, want once from %s", fetched, ociregistry.PublicGoodTUFURL)
	}

	// Twin: a local TUF repository.
	repo := newTUFRepo(t, trJSON)
	local := DefaultShared()
	platform(&local, p)
	local.TrustedRootTUFURL, local.TrustedRootTUFRootPath = repo.URL, writeFile(t, "root.json", repo.RootJSON)
	r = resolver(t, local)
	if _, serr := r.Resolve(ctx, profile(p.keyRef)); serr != nil || repo.Requests() != 0 {
		t.Fatalf("key-signed pack: %v, %d TUF requests", serr, repo.Requests())
	}
	res, serr := r.Resolve(ctx, profile(p.keylessRef))
	if serr != nil || res.Provenance.Subject != testSubject || repo.Requests() == 0 {
		t.Fatalf("keyless pack over a local TUF repository: %v, %+v, %d requests", serr, res, repo.Requests())
	}
	n := repo.Requests()
	if _, serr := r.Resolve(ctx, profile(p.keylessRef)); serr != nil || repo.Requests() != n {
		t.Fatalf("a second keyless profile: %v, %d requests (want the kept root, %d)", serr, repo.Requests(), n)
	}

	repo.SetUnavailable(true)
	down := DefaultShared()
	platform(&down, p)
	down.TrustedRootTUFURL, down.TrustedRootTUFRootPath = local.TrustedRootTUFURL, local.TrustedRootTUFRootPath
	_, serr = resolver(t, down).Resolve(ctx, profile(p.keylessRef))
	if serr == nil || serr.Reason() != v1.ReasonTrustedRootUnavailable || !serr.Transient() ||
		!strings.Contains(serr.Message(), "trusted_root_unavailable: http_status 503") {
		t.Fatalf("repository down: %v", serr)
	}
	for _, leak := range []string{"127.0.0.1", "maintenance", "hunter2"} {
		if strings.Contains(serr.Message(), leak) {
			t.Errorf("message %q carries %q", serr.Message(), leak)
		}
	}
}
