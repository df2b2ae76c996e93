// Package packstore keeps the verified-pack store of the manager in Kubernetes: an
// ociregistry.BlobStore of one ConfigMap per pack reference in the manager's own namespace, written
// only by the manager, so that packs verified before a manager restart verify again while their
// registry is down. The ConfigMaps hold raw registry content by digest, never a verdict: every
// blob is checked against its digest and the whole verification runs again on it (see
// ociregistry.BlobStore and docs/security.md).
//
// The store is read with a direct API reader (the manager caches only CA-bundle ConfigMaps); a
// Sweeper, run by the leader, deletes the entries no McpServiceProfile references.
package packstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/ociregistry"
)

const (
	// LabelVerifiedPack ("true") marks the ConfigMaps of the store.
	LabelVerifiedPack = "connectors.b10x.io/verified-pack"
	// AnnotationReference holds the pack reference (REGISTRY/REPOSITORY@sha256:<hex>) an entry
	// stores; an entry is served only for exactly this reference.
	AnnotationReference = "connectors.b10x.io/pack-reference"
	// ReferrersKey is the binaryData key of the bundle referrer descriptors listed at the
	// verification (JSON array of OCI descriptors). Every other key is a blob digest with ":"
	// written "-" ("sha256-<hex>").
	ReferrersKey = "referrers.json"
	// NamePrefix begins every entry's name; see Name.
	NamePrefix = "verified-pack-"
	// DefaultMaxBytes bounds one entry (blobs and referrer list together): a ConfigMap holds at
	// most 1 MiB. Larger packs are not stored (logged once per pack) and, as before the store,
	// need their registry after a manager restart.
	DefaultMaxBytes = 900 << 10
	// DefaultSweepInterval is the period of the Sweeper.
	DefaultSweepInterval = time.Hour
	// DefaultSweepGrace spares entries younger than this from the Sweeper, so that one written
	// for a profile the sweeping manager's cache does not show yet survives.
	DefaultSweepGrace = 10 * time.Minute
)

// Sentinel errors of the store.
var (
	// ErrInvalidNamespace is returned by New for an empty namespace.
	ErrInvalidNamespace = errors.New("packstore: the store needs a namespace")
	// ErrReadOnly is returned by Save of a store made without a writer (the gateway's: it reads
	// the entries the manager writes). It is ociregistry.ErrStoreReadOnly, so the Verifier drops the
	// evidence it kept for the store instead of offering it again on every pull.
	ErrReadOnly = ociregistry.ErrStoreReadOnly
)

// Store is the ociregistry.BlobStore of ConfigMaps in Namespace.
type Store struct {
	namespace string
	reader    client.Reader
	writer    client.Writer
	maxBytes  int64
	log       logr.Logger

	mu       sync.Mutex
	tooLarge map[string]bool // references already logged as too large
	failing  map[string]bool // references whose last save failed, logged once until a success
}

var _ ociregistry.BlobStore = (*Store)(nil)

// New returns the store of namespace, reading with reader (a direct API reader: ConfigMaps of
// the store are not in the manager's cache) and writing with writer; a nil writer makes the store
// read-only (Save returns ErrReadOnly and makes no request). maxBytes <= 0 means
// DefaultMaxBytes.
func New(namespace string, reader client.Reader, writer client.Writer, maxBytes int64, log logr.Logger) (*Store, error) {
	if namespace == "" {
		return nil, ErrInvalidNamespace
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	return &Store{namespace: namespace, reader: reader, writer: writer, maxBytes: maxBytes, log: log, tooLarge: map[string]bool{}, failing: map[string]bool{}}, nil
}

// Namespace is the namespace of the store's ConfigMaps.
func (s *Store) Namespace() string { return s.namespace }

// Name is the ConfigMap name of ref's entry: NamePrefix, the digest's hex, and 16 hex digits of
// the SHA-256 of the whole reference (one entry per registry and repository).
func Name(ref ociregistry.Reference) string {
	_, hexDigest, _ := strings.Cut(ref.Digest, ":")
	sum := sha256.Sum256([]byte(ref.String()))
	return NamePrefix + hexDigest + "-" + hex.EncodeToString(sum[:8])
}

func blobKey(dgst string) string { return strings.Replace(dgst, ":", "-", 1) }

// Load reads ref's entry. An absent entry, or one for another reference, is ociregistry.ErrNotStored;
// one whose referrer list does not decode, or whose keys are not digests, ociregistry.ErrStoredMismatch.
func (s *Store) Load(ctx context.Context, ref ociregistry.Reference) (*ociregistry.StoredPack, error) {
	cm := &corev1.ConfigMap{}
	if err := s.reader.Get(ctx, types.NamespacedName{Namespace: s.namespace, Name: Name(ref)}, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, ociregistry.ErrNotStored
		}
		return nil, fmt.Errorf("packstore: read %s: %w", Name(ref), err)
	}
	if cm.Labels[LabelVerifiedPack] != "true" || cm.Annotations[AnnotationReference] != ref.String() {
		return nil, ociregistry.ErrNotStored
	}
	rec := &ociregistry.StoredPack{Reference: ref, Blobs: map[string][]byte{}}
	dec := json.NewDecoder(bytes.NewReader(cm.BinaryData[ReferrersKey]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec.Referrers); err != nil {
		return nil, fmt.Errorf("%w: %s", ociregistry.ErrStoredMismatch, ReferrersKey)
	}
	for k, v := range cm.BinaryData {
		if k == ReferrersKey {
			continue
		}
		alg, hexPart, ok := strings.Cut(k, "-")
		if !ok || alg == "" || hexPart == "" {
			return nil, fmt.Errorf("%w: key %.80s", ociregistry.ErrStoredMismatch, k)
		}
		rec.Blobs[alg+":"+hexPart] = v
	}
	return rec, nil
}

// Save writes rec's entry: created when absent, updated when it differs, untouched when equal.
// A record above the bound is refused (ociregistry.ErrStoreTooLarge), logged once per reference.
func (s *Store) Save(ctx context.Context, rec *ociregistry.StoredPack) error {
	if s.writer == nil {
		return ErrReadOnly
	}
	err := s.save(ctx, rec)
	ref := rec.Reference.String()
	s.mu.Lock()
	first := err != nil && !errors.Is(err, ociregistry.ErrStoreTooLarge) && !s.failing[ref] && len(s.failing) < 4096
	if first {
		s.failing[ref] = true
	}
	if err == nil {
		delete(s.failing, ref)
	}
	s.mu.Unlock()
	if first {
		s.log.Error(err, "Could not store the verified pack: it is tried again on its next pull", "reference", ref, "namespace", s.namespace)
	}
	return err
}

func (s *Store) save(ctx context.Context, rec *ociregistry.StoredPack) error {
	refs := rec.Referrers
	if refs == nil {
		refs = []ocispec.Descriptor{}
	}
	list, err := json.Marshal(refs)
	if err != nil {
		return err
	}
	ref := rec.Reference.String()
	if size := rec.Size() + int64(len(list)); size > s.maxBytes {
		s.mu.Lock()
		first := !s.tooLarge[ref]
		if first && len(s.tooLarge) < 4096 {
			s.tooLarge[ref] = true
		}
		s.mu.Unlock()
		if first {
			s.log.Info("Pack too large for the verified-pack store: it needs its registry after a manager restart", "reference", ref, "bytes", size, "maxBytes", s.maxBytes)
		}
		return fmt.Errorf("%w: %d bytes, bound %d", ociregistry.ErrStoreTooLarge, size, s.maxBytes)
	}
	data := map[string][]byte{ReferrersKey: list}
	for d, b := range rec.Blobs {
		data[blobKey(d)] = b
	}
	want := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: s.namespace, Name: Name(rec.Reference),
		Labels:      map[string]string{LabelVerifiedPack: "true"},
		Annotations: map[string]string{AnnotationReference: ref},
	}, BinaryData: data}
	have := &corev1.ConfigMap{}
	err = s.reader.Get(ctx, client.ObjectKeyFromObject(want), have)
	switch {
	case apierrors.IsNotFound(err):
		if err := s.writer.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("packstore: create %s: %w", want.Name, err)
		}
		s.log.Info("Stored the verified pack", "reference", ref, "configMap", want.Name, "bytes", rec.Size())
		return nil
	case err != nil:
		return fmt.Errorf("packstore: read %s: %w", want.Name, err)
	}
	if have.Labels[LabelVerifiedPack] == "true" && have.Annotations[AnnotationReference] == ref && len(have.Data) == 0 &&
		maps.EqualFunc(have.BinaryData, data, bytes.Equal) {
		return nil
	}
	have.Labels, have.Annotations, have.Data, have.BinaryData = want.Labels, want.Annotations, nil, data
	if err := s.writer.Update(ctx, have); err != nil {
		return fmt.Errorf("packstore: update %s: %w", want.Name, err)
	}
	s.log.Info("Replaced the verified pack", "reference", ref, "configMap", want.Name, "bytes", rec.Size())
	return nil
}

// Sweeper deletes the store's entries that no McpServiceProfile references (spec.source.oci.ref)
// and that are older than Grace: once when it starts, then every Interval. It runs on the
// leader only.
type Sweeper struct {
	// Store is the swept store.
	Store *Store
	// Profiles lists McpServiceProfiles of every namespace (the manager's cached client: every
	// shard caches every profile).
	Profiles client.Reader
	// Deleter deletes entries.
	Deleter client.Writer
	// Interval is the sweep period (DefaultSweepInterval when zero); Grace spares young entries
	// (DefaultSweepGrace when zero; negative: none).
	Interval, Grace time.Duration
	// Clock is the time source (the real clock when nil).
	Clock clock.WithTicker
	// Log receives one line per deleted entry and per failed sweep.
	Log logr.Logger
}

// NeedLeaderElection reports true: one manager sweeps.
func (w *Sweeper) NeedLeaderElection() bool { return true }

// Start sweeps at once and then every Interval until ctx ends.
func (w *Sweeper) Start(ctx context.Context) error {
	clk := w.clock()
	interval := w.Interval
	if interval <= 0 {
		interval = DefaultSweepInterval
	}
	t := clk.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := w.Sweep(ctx); err != nil && ctx.Err() == nil {
			w.Log.Error(err, "Verified-pack store sweep failed", "namespace", w.Store.namespace)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

func (w *Sweeper) clock() clock.WithTicker {
	if w.Clock != nil {
		return w.Clock
	}
	return clock.RealClock{}
}

// Sweep deletes the unreferenced entries older than Grace once and returns how many it deleted.
func (w *Sweeper) Sweep(ctx context.Context) (int, error) {
	grace := w.Grace
	if grace == 0 {
		grace = DefaultSweepGrace
	}
	profiles := &apiv1.McpServiceProfileList{}
	if err := w.Profiles.List(ctx, profiles); err != nil {
		return 0, fmt.Errorf("packstore: list profiles: %w", err)
	}
	used := map[string]bool{}
	for i := range profiles.Items {
		if src := profiles.Items[i].Spec.Source.OCI; src != nil {
			if ref, err := ociregistry.ParseDigestReference(src.Ref); err == nil {
				used[ref.String()] = true
			}
		}
	}
	entries := &corev1.ConfigMapList{}
	if err := w.Store.reader.List(ctx, entries, client.InNamespace(w.Store.namespace), client.MatchingLabels{LabelVerifiedPack: "true"}); err != nil {
		return 0, fmt.Errorf("packstore: list entries: %w", err)
	}
	now := w.clock().Now()
	deleted := 0
	for i := range entries.Items {
		cm := &entries.Items[i]
		ref := cm.Annotations[AnnotationReference]
		if used[ref] || (grace > 0 && now.Sub(cm.CreationTimestamp.Time) < grace) {
			continue
		}
		uid, rv := cm.UID, cm.ResourceVersion
		err := w.Deleter.Delete(ctx, cm, client.Preconditions{UID: &uid, ResourceVersion: &rv})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return deleted, fmt.Errorf("packstore: delete %s: %w", cm.Name, err)
		}
		if err == nil {
			deleted++
			w.Log.Info("Deleted an unreferenced verified pack", "reference", ref, "configMap", cm.Name)
		}
	}
	return deleted, nil
}
