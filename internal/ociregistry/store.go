package ociregistry

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/b10x/connector-mcp/ocipack"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/b10x/connector-mcp/refusal"
)

// BlobStore keeps, per pack reference, the raw registry content a successful verification read:
// the pack manifest, its profile layers, the bundle referrers listed for it, their manifests and
// their sigstore bundles. It is a content-addressed copy below verification, never a verdict:
// a Client reads it only when the registry is unavailable (RegistryError.Unavailable), checks
// every blob against its digest, and the Verifier runs the whole verification (signature,
// identity, provenance, policy) again on what it read. A store therefore need not be trusted for
// integrity; a tampered or truncated entry fails closed as the registry being unavailable.
//
// A Client with Credentials neither reads nor writes its store: content pulled with a tenant's
// pull secret is never served to a profile that has none.
type BlobStore interface {
	// Load returns the record stored for ref (pinned by digest). It returns an error wrapping
	// ErrNotStored when there is none, ErrStoredMismatch when the stored record cannot be
	// decoded; any other error means the store could not be read.
	Load(ctx context.Context, ref Reference) (*StoredPack, error)
	// Save stores rec, replacing the record of the same reference. A store may refuse a record
	// above its size bound with an error wrapping ErrStoreTooLarge, and a read-only store refuses
	// every record with ErrStoreReadOnly. Saving a record equal to the
	// stored one should write nothing.
	Save(ctx context.Context, rec *StoredPack) error
}

// StoredPack is the registry content one verification of a pack read.
type StoredPack struct {
	// Reference is the pack, pinned by digest; content is served back only for this exact
	// registry, repository and digest.
	Reference Reference
	// Referrers are the bundle referrer descriptors the registry listed for the pack at that
	// verification (the one mutable lookup, recorded as it was). Each is still fetched from
	// Blobs by digest and verified.
	Referrers []ocispec.Descriptor
	// Blobs are the manifests, layers and bundles by digest ("sha256:<hex>").
	Blobs map[string][]byte
}

// Size is the number of content bytes of the record (blobs only).
func (p *StoredPack) Size() int64 {
	var n int64
	for _, b := range p.Blobs {
		n += int64(len(b))
	}
	return n
}

// Names of the outcome of the stored fallback, reported in RegistryError.Stored when the stored
// copy could not stand in for an unavailable registry.
const (
	// StoredAbsent: the store holds no record of this pack reference.
	StoredAbsent = "stored_absent"
	// StoredDigestMismatch: a stored blob is missing, or does not match its digest or size, or
	// the record does not decode. The fallback fails closed.
	StoredDigestMismatch = "stored_digest_mismatch"
	// StoredUnreadable: the store could not be read.
	StoredUnreadable = "stored_unreadable"
)

// Sentinel errors of BlobStore implementations and of the stored fallback.
var (
	// ErrNotStored is the reason a BlobStore holds no record for a reference.
	ErrNotStored = errors.New("pack not in the verified-pack store")
	// ErrStoredMismatch is the reason stored content cannot stand in for the registry: a blob
	// missing from the record, or not matching its digest or size, or a record that does not
	// decode.
	ErrStoredMismatch = errors.New("stored content does not match its digest")
	// ErrStoreTooLarge is the reason a BlobStore refuses a record above its size bound.
	ErrStoreTooLarge = errors.New("pack too large for the verified-pack store")
	// ErrStoreReadOnly is the reason a read-only BlobStore (one that serves entries another
	// process writes, as the gateway's does) refuses every Save; the Verifier then keeps no
	// evidence for it.
	ErrStoreReadOnly = errors.New("read-only verified-pack store")
)

// storeUsable reports whether c reads and writes its store: one is set and c pulls anonymously.
func (c *Client) storeUsable() bool { return c.Store != nil && c.Credentials == nil }

// withStore runs f on the stored copy of ref when regErr says the registry is unavailable and c
// has a usable store; it reports whether the result came from the store. A stored copy that is
// absent, unreadable or does not match its digests yields regErr again, naming why in
// RegistryError.Stored (the caller retries, as for any outage). Refusals of the stored content
// itself (it verified against its digests, so the registry served the same bytes) are returned.
func withStore[T any](ctx context.Context, c *Client, ref Reference, regErr error, f func(contentSource) (T, error)) (T, bool, error) {
	var zero T
	var re *RegistryError
	if !c.storeUsable() || !errors.As(regErr, &re) || !re.Unavailable() || ctx.Err() != nil {
		return zero, false, regErr
	}
	failed := func(name string) error {
		return &RegistryError{Op: re.Op, Err: re.Err, Stored: name}
	}
	rec, err := c.Store.Load(ctx, ref)
	switch {
	case errors.Is(err, ErrNotStored):
		return zero, false, failed(StoredAbsent)
	case errors.Is(err, ErrStoredMismatch):
		return zero, false, failed(StoredDigestMismatch)
	case err != nil:
		return zero, false, failed(StoredUnreadable)
	case rec == nil || rec.Reference.String() != ref.String():
		return zero, false, failed(StoredAbsent)
	}
	out, err := f(storedSource{rec: rec})
	if errors.Is(err, ErrStoredMismatch) {
		return zero, false, failed(StoredDigestMismatch)
	}
	if err != nil {
		return zero, false, err
	}
	return out, true, nil
}

// contentSource is where a pull or a bundle listing reads content: the registry, or the stored
// copy of a verification.
type contentSource interface {
	// manifest returns the manifest named by dgst, at most max bytes, matching dgst.
	manifest(ctx context.Context, dgst string, max int64) ([]byte, error)
	// blob returns exactly desc.Size bytes hashing to desc.Digest.
	blob(ctx context.Context, desc ocispec.Descriptor) ([]byte, error)
	// referrers lists the bundle referrers of subject.
	referrers(ctx context.Context, subject ocispec.Descriptor, fn func([]ocispec.Descriptor) error) error
}

// storedSource serves a StoredPack: every blob checked against the descriptor it is asked by.
type storedSource struct{ rec *StoredPack }

func (s storedSource) manifest(_ context.Context, dgst string, max int64) ([]byte, error) {
	b, err := s.get(ocispec.Descriptor{Digest: digest.Digest(dgst), Size: -1})
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, refuse(ocipack.RefusalManifestTooLarge, "", ocipack.ErrManifestTooLarge)
	}
	return b, nil
}

func (s storedSource) blob(_ context.Context, desc ocispec.Descriptor) ([]byte, error) {
	return s.get(desc)
}

func (s storedSource) referrers(_ context.Context, _ ocispec.Descriptor, fn func([]ocispec.Descriptor) error) error {
	return fn(s.rec.Referrers)
}

// get returns the stored blob of desc when it hashes to desc.Digest and (when desc.Size is
// known) has desc.Size bytes; otherwise an error wrapping ErrStoredMismatch.
func (s storedSource) get(desc ocispec.Descriptor) ([]byte, error) {
	mismatch := fmt.Errorf("%w: %s", ErrStoredMismatch, refusal.Clip(desc.Digest.String(), 80))
	if desc.Digest.Validate() != nil {
		return nil, mismatch
	}
	b, ok := s.rec.Blobs[desc.Digest.String()]
	if !ok || (desc.Size >= 0 && int64(len(b)) != desc.Size) || desc.Digest.Algorithm().FromBytes(b) != desc.Digest {
		return nil, mismatch
	}
	return b, nil
}

// evidence is the registry content a verification read, kept until the pack is pulled and the
// record saved.
type evidence struct {
	referrers []ocispec.Descriptor
	blobs     map[string][]byte
}

func evidenceOf(refs []Referrer) *evidence {
	e := &evidence{blobs: map[string][]byte{}}
	for _, r := range refs {
		if r.manifest == nil {
			continue
		}
		e.referrers = append(e.referrers, r.Descriptor)
		e.blobs[r.Descriptor.Digest.String()] = r.manifest
		e.blobs[r.layer.Digest.String()] = r.Bundle
	}
	return e
}

// record is the StoredPack of a verified and pulled pack.
func (e *evidence) record(p *Pack) *StoredPack {
	blobs := maps.Clone(e.blobs)
	blobs[p.Reference.Digest] = p.Manifest
	for i, l := range p.layers {
		if i < len(p.Layers) {
			blobs[l.Digest.String()] = p.Layers[i]
		}
	}
	return &StoredPack{Reference: p.Reference, Referrers: e.referrers, Blobs: blobs}
}
