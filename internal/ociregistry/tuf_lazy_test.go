package ociregistry

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"

	"github.com/b10x/connector-mcp/internal/netcause"
	"github.com/b10x/connector-mcp/internal/ocitest"
	"github.com/b10x/connector-mcp/ocipack"
	"github.com/b10x/connector-mcp/refusal"
)

// countingSource is a TrustedRootSource that counts its calls and answers material, or err.
type countingSource struct {
	mu       sync.Mutex
	calls    int
	material root.TrustedMaterial
	err      error
}

func (s *countingSource) TrustedRoot(context.Context) (root.TrustedMaterial, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	return s.material, s.err
}

// TestVerifierAsksTheTrustedRootOnlyForKeyless: a verifier with a lazy trusted root source checks
// key-signed packs, under a keyless policy listed first too, without asking it; the first
// keyless bundle asks it. Twins: a source that fails makes the verdict
// trusted_root_unavailable, even beside a key policy that got further, and is asked again on the
// next verification (nothing is cached); without any source keyless stays refused
// (invalid_policy), as before.
func TestVerifierAsksTheTrustedRootOnlyForKeyless(t *testing.T) {
	ctx := context.Background()
	vs := virtualSigstore(t)
	reg := ocitest.New(ocitest.Options{Referrers: true})
	defer reg.Close()

	keyRef, c := pushed(t, reg, 1)
	s, pub := keySigner(t)
	if _, err := s.Sign(ctx, c, keyRef, testProvenance()); err != nil {
		t.Fatal(err)
	}
	src := &countingSource{material: vs}
	v := NewVerifier(c, nil, WithTrustedRootSource(src), WithCacheSize(0))
	i, _, err := v.VerifyAny(ctx, keyRef, []Policy{keylessPolicy(), {PublicKey: pub, Provenance: provenancePolicy()}})
	if err != nil || i != 1 || src.calls != 0 {
		t.Fatalf("key-signed pack: policy %d, %v, %d trusted-root requests (want 1, nil, 0)", i, err, src.calls)
	}
	// A keyless policy alone against key-signed bundles is refused as before, still unasked.
	if _, err := v.Verify(ctx, keyRef, keylessPolicy()); !errors.Is(err, ocipack.ErrUntrustedSignature) || src.calls != 0 {
		t.Fatalf("keyless policy, key-signed pack: %v after %d requests", err, src.calls)
	}

	reg2 := ocitest.New(ocitest.Options{Referrers: true})
	defer reg2.Close()
	keylessRef, c2 := pushed(t, reg2, 1)
	if _, err := keylessSigner(t, vs, testIdentity, testIssuer).Sign(ctx, c2, keylessRef, testProvenance()); err != nil {
		t.Fatal(err)
	}
	v2 := NewVerifier(c2, nil, WithTrustedRootSource(src), WithCacheSize(0))
	if _, err := v2.Verify(ctx, keylessRef, keylessPolicy()); err != nil || src.calls != 1 {
		t.Fatalf("keyless pack: %v after %d requests (want nil after 1)", err, src.calls)
	}

	// Twin: the source fails.
	src.err, src.material = &TrustedRootError{Cause: netcause.Refused, Err: errors.New("dial tcp 127.0.0.1:1")}, nil
	_, other := keySigner(t)
	_, _, err = v2.VerifyAny(ctx, keylessRef, []Policy{{PublicKey: other, Provenance: provenancePolicy()}, keylessPolicy()})
	var tre *TrustedRootError
	if !errors.As(err, &tre) || !errors.Is(err, ocipack.ErrTrustedRootUnavailable) || refusal.Name(err) != ocipack.RefusalTrustedRootUnavailable {
		t.Fatalf("failing source: %v, want a TrustedRootError", err)
	}
	src.err, src.material = nil, vs
	if _, err := v2.Verify(ctx, keylessRef, keylessPolicy()); err != nil {
		t.Fatalf("after the source recovered: %v", err)
	}

	// Without a source (keyless off) the policy cannot be used, as before.
	_, err = NewVerifier(c2, nil).Verify(ctx, keylessRef, keylessPolicy())
	wantRefusal(t, err, ocipack.RefusalInvalidPolicy, ocipack.ErrInvalidPolicy)
}

// trustedRootJSON is the trusted_root.json of vs's Fulcio CA and TSA.
func trustedRootJSON(t *testing.T, vs *ca.VirtualSigstore) []byte {
	t.Helper()
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01, vs.FulcioCertificateAuthorities(), nil, vs.TimestampingAuthorities(), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := tr.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newTUFRepo(t *testing.T, target []byte) *ocitest.TUFRepo {
	t.Helper()
	r, err := ocitest.NewTUFRepo(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestTUFTrustedRootIsLazyKeptAndRefreshed: nothing is fetched when the source is made; the first
// use fetches, the next uses are answered from the kept root, and the first use after the
// refresh interval fetches again. A refresh that fails keeps the kept root.
func TestTUFTrustedRootIsLazyKeptAndRefreshed(t *testing.T) {
	ctx := context.Background()
	vs := virtualSigstore(t)
	repo := newTUFRepo(t, trustedRootJSON(t, vs))
	src, err := NewTUFTrustedRoot(repo.URL, repo.RootJSON, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: time.Now()}
	src.Now = clock.Now
	if repo.Requests() != 0 || src.Fetches() != 0 {
		t.Fatalf("made: %d requests, %d fetches (want none)", repo.Requests(), src.Fetches())
	}
	got, err := src.TrustedRoot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cas := got.FulcioCertificateAuthorities()
	if len(cas) != 1 || !cas[0].(*root.FulcioCertificateAuthority).Root.Equal(vs.FulcioCertificateAuthorities()[0].(*root.FulcioCertificateAuthority).Root) {
		t.Fatalf("fetched %d certificate authorities, not the repository's", len(cas))
	}
	first := repo.Requests()
	if first == 0 {
		t.Fatal("the first use fetched nothing")
	}
	clock.Add(23 * time.Hour)
	if _, err := src.TrustedRoot(ctx); err != nil || repo.Requests() != first {
		t.Fatalf("within a day: %v, %d requests (want %d)", err, repo.Requests(), first)
	}
	clock.Add(2 * time.Hour)
	if _, err := src.TrustedRoot(ctx); err != nil || repo.Requests() <= first || src.Fetches() != 2 {
		t.Fatalf("after a day: %v, %d requests, %d fetches (want a second fetch)", err, repo.Requests(), src.Fetches())
	}
	repo.SetUnavailable(true)
	clock.Add(25 * time.Hour)
	if kept, err := src.TrustedRoot(ctx); err != nil || kept == nil || src.Fetches() != 3 {
		t.Fatalf("failed refresh: %v, %v after %d fetches (want the kept root after a third fetch)", kept, err, src.Fetches())
	}
}

// TestTUFTrustedRootFailures: a repository that is down, one that is not listening and one that
// another root signed are TrustedRootErrors naming only the cause class, never the URL or the
// page the repository answered; a failure is not retried before RetryAfter, and the next use
// after it recovers. An anchor that is not TUF root metadata is refused when the source is made.
func TestTUFTrustedRootFailures(t *testing.T) {
	ctx := context.Background()
	target := trustedRootJSON(t, virtualSigstore(t))
	repo := newTUFRepo(t, target)
	repo.SetUnavailable(true)
	src, err := NewTUFTrustedRoot(repo.URL, repo.RootJSON, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: time.Now()}
	src.Now = clock.Now
	_, err = src.TrustedRoot(ctx)
	var tre *TrustedRootError
	if !errors.As(err, &tre) || tre.TrustedRootCause() != "http_status 503" || !errors.Is(err, ocipack.ErrTrustedRootUnavailable) {
		t.Fatalf("repository down: %v", err)
	}
	for _, leak := range []string{"127.0.0.1", "maintenance", "hunter2", "root.json"} {
		if strings.Contains(err.Error(), leak) {
			t.Errorf("%q carries %q", err, leak)
		}
	}
	n := repo.Requests()
	repo.SetUnavailable(false)
	if _, err := src.TrustedRoot(ctx); err == nil || repo.Requests() != n {
		t.Fatalf("retried at once: %v, %d requests (want the remembered failure, %d)", err, repo.Requests(), n)
	}
	clock.Add(DefaultTUFRetryAfter)
	if _, err := src.TrustedRoot(ctx); err != nil {
		t.Fatalf("after RetryAfter, repository back: %v", err)
	}

	// Not listening.
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	down, err := NewTUFTrustedRoot(dead.URL, repo.RootJSON, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := down.TrustedRoot(ctx); !errors.As(err, &tre) || tre.Cause != netcause.Refused {
		t.Fatalf("nothing listening: %v", err)
	}
	// Signed by other keys than the anchor's.
	other := newTUFRepo(t, target)
	foreign, err := NewTUFTrustedRoot(repo.URL, other.RootJSON, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := foreign.TrustedRoot(ctx); !errors.As(err, &tre) || tre.Cause != TrustedRootCauseUnverified {
		t.Fatalf("another root's repository: %v", err)
	}
	// A refused fetch dials nothing.
	before := repo.Requests()
	guarded, err := NewTUFTrustedRoot(repo.URL, repo.RootJSON, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	guarded.BeforeFetch = func(string) error { return errors.New("no fetch in this test") }
	if _, err := guarded.TrustedRoot(ctx); !errors.As(err, &tre) || tre.Cause != TrustedRootCauseRefused || repo.Requests() != before {
		t.Fatalf("refused fetch: %v, %d requests (want %d)", err, repo.Requests(), before)
	}
	if _, err := NewTUFTrustedRoot(repo.URL, []byte(`{"signed":{}}`), http.DefaultClient); refusalName(err) != ocipack.RefusalInvalidTrustedRoot {
		t.Fatalf("invalid anchor: %v", err)
	}
}
