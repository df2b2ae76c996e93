package ociregistry

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/b10x/connector-mcp/ocipack"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/b10x/connector-mcp/internal/ocitest"
)

// memStore is a BlobStore in memory: the interface's contract, the way the Kubernetes store
// (internal/packstore, exercised by the envtest restart-outage story) keeps it.
type memStore struct {
	mu    sync.Mutex
	recs  map[string]*StoredPack
	saves int
	max   int64
}

func newMemStore() *memStore { return &memStore{recs: map[string]*StoredPack{}} }

func (m *memStore) Load(_ context.Context, ref Reference) (*StoredPack, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.recs[ref.String()]
	if !ok {
		return nil, ErrNotStored
	}
	return &StoredPack{Reference: r.Reference, Referrers: r.Referrers, Blobs: maps.Clone(r.Blobs)}, nil
}

func (m *memStore) Save(_ context.Context, rec *StoredPack) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.max > 0 && rec.Size() > m.max {
		return ErrStoreTooLarge
	}
	m.saves++
	m.recs[rec.Reference.String()] = rec
	return nil
}

// edit changes the stored record of ref.
func (m *memStore) edit(ref Reference, f func(*StoredPack)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f(m.recs[ref.String()])
}

// outage is what the registry front answers while "down".
type outage int32

const (
	up outage = iota
	down503
	down429
	downReset // the connection is closed without an answer
	down404
	down401
)

// storeWorld is a signed pack behind a front whose availability the test switches, verified
// once (registry up) by a verifier whose client saves to store.
type storeWorld struct {
	ref    Reference
	pub    crypto.PublicKey
	store  *memStore
	mode   atomic.Int32
	policy Policy
	first  *Result
}

func newStoreWorld(t *testing.T, referrers bool) *storeWorld {
	t.Helper()
	reg := ocitest.New(ocitest.Options{Referrers: referrers})
	t.Cleanup(reg.Close)
	ref, c := pushed(t, reg, 1)
	s, pub := keySigner(t)
	ctx := context.Background()
	if _, err := s.Sign(ctx, c, ref, testProvenance()); err != nil {
		t.Fatal(err)
	}
	w := &storeWorld{pub: pub, store: newMemStore(), policy: Policy{PublicKey: pub, Provenance: provenancePolicy()}}
	ref.Registry = front(t, reg, func(rw http.ResponseWriter, r *http.Request) bool {
		switch outage(w.mode.Load()) {
		case down503:
			rw.WriteHeader(http.StatusServiceUnavailable)
		case down429:
			rw.WriteHeader(http.StatusTooManyRequests)
		case down404:
			rw.WriteHeader(http.StatusNotFound)
		case down401:
			rw.WriteHeader(http.StatusUnauthorized)
		case downReset:
			conn, _, err := rw.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		default:
			return false
		}
		return true
	})
	w.ref = ref
	v := NewVerifier(w.client(), nil)
	res, p, err := v.VerifyAndPull(ctx, ref, w.policy)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Profiles) != 1 {
		t.Fatalf("%d profiles", len(p.Profiles))
	}
	w.first = res
	return w
}

// client is a fresh client (a restarted manager's) on the front, with the store.
func (w *storeWorld) client() *Client { return &Client{PlainHTTP: true, Store: w.store} }

// restarted verifies and pulls w's pack with a new verifier (no cache) and a new client.
func (w *storeWorld) restarted(t *testing.T, policy Policy) (*Result, *Pack, error) {
	t.Helper()
	return NewVerifier(w.client(), nil).VerifyAndPull(context.Background(), w.ref, policy)
}

func wantUnavailable(t *testing.T, err error, stored string) {
	t.Helper()
	var re *RegistryError
	if !errors.As(err, &re) || isRefusal(err) || !re.Unavailable() || re.Stored != stored {
		t.Fatalf("got %v, want an unavailable RegistryError with stored copy %q", err, stored)
	}
	if !strings.Contains(err.Error(), "(stored copy: "+stored+")") {
		t.Fatalf("message %q does not name the stored copy", err)
	}
}

// The store holds what the verification read: the manifest, the layer, the referrer manifests
// and their bundles, and the referrers listed; it is saved once.
func TestStoreSavesVerifiedContent(t *testing.T) {
	for _, referrers := range []bool{true, false} {
		w := newStoreWorld(t, referrers)
		rec, err := w.store.Load(context.Background(), w.ref)
		if err != nil {
			t.Fatal(err)
		}
		// manifest + layer + (signature and provenance: referrer manifest + bundle each)
		if len(rec.Referrers) != 2 || len(rec.Blobs) != 6 || w.store.saves != 1 {
			t.Fatalf("referrers API %v: %d referrers, %d blobs, %d saves", referrers, len(rec.Referrers), len(rec.Blobs), w.store.saves)
		}
		for d, b := range rec.Blobs {
			if digest.FromBytes(b).String() != d {
				t.Fatalf("blob %s stored under another digest", d)
			}
		}
		if _, ok := rec.Blobs[w.ref.Digest]; !ok {
			t.Fatal("the pack manifest is not stored")
		}
	}
}

// While the registry is unavailable (503, 429, connection reset), a new verifier verifies and
// pulls the pack from the store, with the same result as from the registry.
func TestStoreStandsInWhileRegistryUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode outage
	}{{"503", down503}, {"429", down429}, {"connection reset", downReset}} {
		t.Run(tc.name, func(t *testing.T) {
			w := newStoreWorld(t, true)
			w.mode.Store(int32(tc.mode))
			res, p, err := w.restarted(t, w.policy)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(res, w.first) || len(p.Profiles) != 1 || p.Reference != w.ref {
				t.Fatalf("from the store: %+v, %d profiles; from the registry %+v", res, len(p.Profiles), w.first)
			}
			if w.store.saves != 1 {
				t.Fatalf("content read from the store was saved again (%d saves)", w.store.saves)
			}
		})
	}
}

// Twins: without a stored record the outage stays an outage (stored_absent); a registry that
// answers 404 or 401 is not unavailable, and the store is not read.
func TestStoreFallbackOnlyOnUnavailable(t *testing.T) {
	t.Run("not stored", func(t *testing.T) {
		w := newStoreWorld(t, true)
		w.store.recs = map[string]*StoredPack{}
		w.mode.Store(int32(down503))
		_, _, err := w.restarted(t, w.policy)
		wantUnavailable(t, err, StoredAbsent)
	})
	for _, tc := range []struct {
		name string
		mode outage
	}{{"404", down404}, {"401", down401}} {
		t.Run(tc.name, func(t *testing.T) {
			w := newStoreWorld(t, true)
			w.mode.Store(int32(tc.mode))
			_, err := w.client().Pull(context.Background(), w.ref)
			var re *RegistryError
			if !errors.As(err, &re) || re.Unavailable() || re.Stored != "" {
				t.Fatalf("pull: got %v, want a RegistryError that is not unavailability and no stored fallback", err)
			}
			// The referrers listing: a 404 is "no referrers" (as without a store), a 401 an error.
			refs, err := w.client().Bundles(context.Background(), w.ref)
			if tc.mode == down404 && (err != nil || len(refs) != 0) {
				t.Fatalf("bundles: %d referrers, %v; want none from a registry answering 404", len(refs), err)
			}
			if tc.mode == down401 && (!errors.As(err, &re) || re.Unavailable() || re.Stored != "") {
				t.Fatalf("bundles: got %v, want a RegistryError that is not unavailability and no stored fallback", err)
			}
		})
	}
	t.Run("client with credentials", func(t *testing.T) {
		w := newStoreWorld(t, true)
		w.mode.Store(int32(down503))
		c := w.client()
		c.Credentials = auth.StaticCredential(w.ref.Registry, auth.Credential{Username: "u", Password: "p"})
		_, _, err := NewVerifier(c, nil).VerifyAndPull(context.Background(), w.ref, w.policy)
		var re *RegistryError
		if !errors.As(err, &re) || !re.Unavailable() || re.Stored != "" {
			t.Fatalf("got %v, want the outage without a stored fallback", err)
		}
	})
	t.Run("client with credentials saves nothing", func(t *testing.T) {
		w := newStoreWorld(t, true)
		w.store.recs = map[string]*StoredPack{}
		c := w.client()
		// The registry asks for no authentication: the pull succeeds, with the credentials unused.
		c.Credentials = auth.StaticCredential(w.ref.Registry, auth.Credential{Username: "u", Password: "p"})
		if _, _, err := NewVerifier(c, nil).VerifyAndPull(context.Background(), w.ref, w.policy); err != nil {
			t.Fatal(err)
		}
		if len(w.store.recs) != 0 {
			t.Fatal("a pack pulled by a client with credentials was stored")
		}
		// The twin: the same pull without credentials is stored.
		if _, _, err := NewVerifier(w.client(), nil).VerifyAndPull(context.Background(), w.ref, w.policy); err != nil || len(w.store.recs) != 1 {
			t.Fatalf("anonymous pull: %v, %d records stored", err, len(w.store.recs))
		}
	})
}

// A stored entry that was tampered with, truncated or lost a blob fails closed: the outage is
// reported (transient, stored_digest_mismatch), never a verification result or a refusal.
func TestStoreTamperFailsClosed(t *testing.T) {
	flip := func(b []byte) []byte { c := append([]byte(nil), b...); c[len(c)/2] ^= 1; return c }
	cut := func(b []byte) []byte { return append([]byte(nil), b[:len(b)-1]...) }
	kinds := func(rec *StoredPack) map[string]string { // blob digest -> what it is
		out := map[string]string{rec.Reference.Digest: "pack manifest"}
		for _, r := range rec.Referrers {
			out[r.Digest.String()] = "referrer manifest"
		}
		for d := range rec.Blobs {
			if _, ok := out[d]; !ok {
				if strings.Contains(string(rec.Blobs[d]), "dsseEnvelope") {
					out[d] = "bundle"
				} else {
					out[d] = "layer"
				}
			}
		}
		return out
	}
	w0 := newStoreWorld(t, true)
	rec0, _ := w0.store.Load(context.Background(), w0.ref)
	seen := map[string]bool{}
	for _, kind := range kinds(rec0) {
		seen[kind] = true
	}
	if len(seen) != 4 {
		t.Fatalf("blob kinds %v", seen)
	}
	for kind := range seen {
		for name, change := range map[string]func(b []byte) []byte{"flipped": flip, "truncated": cut, "removed": nil} {
			t.Run(kind+" "+name, func(t *testing.T) {
				w := newStoreWorld(t, true)
				w.store.edit(w.ref, func(rec *StoredPack) {
					for d, k := range kinds(rec) {
						if k != kind {
							continue
						}
						if change == nil {
							delete(rec.Blobs, d)
						} else {
							rec.Blobs[d] = change(rec.Blobs[d])
						}
					}
				})
				w.mode.Store(int32(down503))
				_, _, err := w.restarted(t, w.policy)
				wantUnavailable(t, err, StoredDigestMismatch)
			})
		}
	}
	t.Run("referrer listed under another digest", func(t *testing.T) {
		w := newStoreWorld(t, true)
		w.store.edit(w.ref, func(rec *StoredPack) {
			rec.Referrers = append([]ocispec.Descriptor(nil), rec.Referrers...)
			rec.Referrers[0].Digest = digest.FromString("another")
		})
		w.mode.Store(int32(down503))
		_, _, err := w.restarted(t, w.policy)
		wantUnavailable(t, err, StoredDigestMismatch)
	})
}

// The whole verification runs on stored content: under a policy the stored signature does not
// satisfy, the pack is refused exactly as from the registry; a complete, self-consistent record
// planted for a pack signed by an untrusted key is refused too.
func TestStoreContentIsVerifiedAgain(t *testing.T) {
	t.Run("other key", func(t *testing.T) {
		w := newStoreWorld(t, true)
		w.mode.Store(int32(down503))
		_, other := keySigner(t)
		_, _, err := w.restarted(t, Policy{PublicKey: other, Provenance: provenancePolicy()})
		wantRefusal(t, err, ocipack.RefusalUntrustedSignature, ocipack.ErrUntrustedSignature)
	})
	t.Run("other source ref", func(t *testing.T) {
		w := newStoreWorld(t, true)
		w.mode.Store(int32(down503))
		prov := provenancePolicy()
		prov.SourceRef = "refs/heads/release"
		_, _, err := w.restarted(t, Policy{PublicKey: w.pub, Provenance: prov})
		wantRefusal(t, err, ocipack.RefusalWrongSourceRef, ocipack.ErrWrongSourceRef)
	})
	t.Run("planted record of an untrusted signer", func(t *testing.T) {
		// A pack signed by an attacker's key, verified under that key into the attacker's
		// store; its record is planted in the victim's store under the victim's reference.
		reg := ocitest.New(ocitest.Options{Referrers: true})
		defer reg.Close()
		ref, c := pushed(t, reg, 1)
		evil, evilPub := keySigner(t)
		ctx := context.Background()
		if _, err := evil.Sign(ctx, c, ref, testProvenance()); err != nil {
			t.Fatal(err)
		}
		attacker := newMemStore()
		if _, _, err := NewVerifier(&Client{PlainHTTP: true, Store: attacker}, nil).VerifyAndPull(ctx, ref, Policy{PublicKey: evilPub, Provenance: provenancePolicy()}); err != nil {
			t.Fatal(err)
		}
		planted, err := attacker.Load(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		reg.Close()
		_, trusted := keySigner(t)
		victim := newMemStore()
		victim.recs[ref.String()] = planted
		_, _, err = NewVerifier(&Client{PlainHTTP: true, Store: victim}, nil).VerifyAndPull(ctx, ref, Policy{PublicKey: trusted, Provenance: provenancePolicy()})
		wantRefusal(t, err, ocipack.RefusalUntrustedSignature, ocipack.ErrUntrustedSignature)
	})
	t.Run("record of another repository", func(t *testing.T) {
		w := newStoreWorld(t, true)
		rec, _ := w.store.Load(context.Background(), w.ref)
		other := w.ref
		other.Repository = "team/other"
		rec.Reference = other
		w.store.recs = map[string]*StoredPack{w.ref.String(): rec}
		w.mode.Store(int32(down503))
		_, _, err := w.restarted(t, w.policy)
		wantUnavailable(t, err, StoredAbsent)
	})
}

// A store that refuses a record above its bound (ErrStoreTooLarge) is not asked again for that
// pack by the same verifier; one that saves it keeps it.
func TestStoreBound(t *testing.T) {
	w := newStoreWorld(t, true)
	rec, _ := w.store.Load(context.Background(), w.ref)
	for _, tc := range []struct {
		max       int64
		wantSaved bool
	}{{rec.Size() - 1, false}, {rec.Size(), true}} {
		s := newMemStore()
		s.max = tc.max
		v := NewVerifier(&Client{PlainHTTP: true, Store: s}, nil)
		for i := 0; i < 2; i++ {
			if _, _, err := v.VerifyAndPull(context.Background(), w.ref, w.policy); err != nil {
				t.Fatal(err)
			}
		}
		_, err := s.Load(context.Background(), w.ref)
		if saved := err == nil; saved != tc.wantSaved {
			t.Fatalf("bound %d (record %d bytes): saved %v", tc.max, rec.Size(), saved)
		}
	}
}

// The client's bounds apply to stored content as to the registry's: under tighter limits the
// stored copy is refused (never accepted because it came from the store), with the registry's
// refusal when the registry refuses. A referrers answer above the manifest bound cannot be told
// from a transfer broken off (oras-go reads it through a limit: io.ErrUnexpectedEOF), so it counts
// as unavailability; the stored list is then read, and its referrer manifests, above the same
// bound, are no evidence: missing_signature.
func TestStoreContentWithinLimits(t *testing.T) {
	for name, lim := range map[string]Limits{
		"one referrer":        {MaxReferrers: 1},
		"small manifests":     {MaxManifestBytes: 64},
		"small bundles":       {MaxBundleBytes: 100},
		"small layers (pull)": {MaxLayerBytes: 16},
	} {
		t.Run(name, func(t *testing.T) {
			w := newStoreWorld(t, true)
			ctx := context.Background()
			_, _, fromRegistry := NewVerifier(&Client{PlainHTTP: true, Limits: lim}, nil).VerifyAndPull(ctx, w.ref, w.policy)
			w.mode.Store(int32(down503))
			c := w.client()
			c.Limits = lim
			_, _, fromStore := NewVerifier(c, nil).VerifyAndPull(ctx, w.ref, w.policy)
			if fromRegistry == nil || fromStore == nil {
				t.Fatalf("registry: %v; store: %v; want both refused", fromRegistry, fromStore)
			}
			var r *ocipack.RefusalError
			if errors.As(fromRegistry, &r) && outcome(fromStore) != r.Name {
				t.Fatalf("registry: %v; store: %v; want the same refusal", fromRegistry, fromStore)
			}
			if name == "small manifests" && (outcome(fromRegistry) != "registry_unavailable" || outcome(fromStore) != ocipack.RefusalMissingSignature) {
				t.Fatalf("registry: %v; store: %v", fromRegistry, fromStore)
			}
		})
	}
}

// outcome names how a verification failed: its refusal, or registry_error / registry_unavailable.
func outcome(err error) string {
	var r *ocipack.RefusalError
	var re *RegistryError
	switch {
	case errors.As(err, &r):
		return r.Name
	case errors.As(err, &re) && re.Unavailable():
		return "registry_unavailable"
	case errors.As(err, &re):
		return "registry_error"
	}
	return fmt.Sprint(err)
}

// failingStore loads nothing and refuses every Save with err, counting the attempts.
type failingStore struct {
	err   error
	saves atomic.Int32
}

func (f *failingStore) Load(context.Context, Reference) (*StoredPack, error) {
	return nil, ErrNotStored
}

func (f *failingStore) Save(context.Context, *StoredPack) error {
	f.saves.Add(1)
	return f.err
}

// A read-only store (the gateway's) is offered a verified pack's evidence once: the verifier
// drops it on ErrStoreReadOnly instead of offering it again on every pull. The twin: a store that
// failed for another reason is offered it again on the next pull (the write may succeed then).
func TestReadOnlyStoreIsOfferedEvidenceOnce(t *testing.T) {
	w := newStoreWorld(t, true)
	for _, tc := range []struct {
		name string
		err  error
		want int32
	}{
		{"read-only", fmt.Errorf("packstore: %w", ErrStoreReadOnly), 1},
		{"transient failure", errors.New("apiserver unavailable"), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &failingStore{err: tc.err}
			v := NewVerifier(&Client{PlainHTTP: true, Store: st}, nil)
			if _, _, err := v.VerifyAndPull(context.Background(), w.ref, w.policy); err != nil {
				t.Fatal(err)
			}
			if _, err := v.Pull(context.Background(), w.ref); err != nil {
				t.Fatal(err)
			}
			if got := st.saves.Load(); got != tc.want {
				t.Fatalf("%d saves over two pulls, want %d", got, tc.want)
			}
		})
	}
}
