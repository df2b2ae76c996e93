package activation

import (
	"go.opentelemetry.io/otel/trace"

	"context"
	"sync"

	"github.com/b10x/connector-mcp/internal/tracing"
	"github.com/b10x/connector-mcp/refusal"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/lru"
	"github.com/b10x/connector-mcp/ocipack"
	"github.com/b10x/connector-mcp/snapshot"
)

// Resolved is a verified profile: its document, the reconstructed recorded snapshot and what was
// proven about its source.
type Resolved struct {
	// Document is the verified profile document. Treat it as read-only.
	Document *v1.ProfileDocument
	// Snapshot is the recorded snapshot whose digests were reconstructed and matched. Treat it as
	// read-only: a pack's is shared with the verifier's pulled pack.
	Snapshot *snapshot.ToolSnapshot
	// PackDigest is the pack manifest digest (OCI sources).
	PackDigest string
	// ProfileDigest is the digest of the document's canonical form.
	ProfileDigest string
	// Provenance is the verified identity and build provenance (OCI sources).
	Provenance *v1.VerifiedProvenance
}

// TrustFingerprinter is implemented by a SourceVerifier whose decision depends on cluster state
// beyond the profile (McpTrustPolicies, namespace labels). The Resolver keys its memo on the
// fingerprint, so a change of that state is noticed at the next resolve.
type TrustFingerprinter interface {
	// TrustFingerprint identifies the trust that applies to namespace ns.
	TrustFingerprint(ctx context.Context, ns string) (string, error)
}

// Resolver turns an McpServiceProfile into a verified document under the cluster policy. It is
// shared by both reconcilers. Results are memoized per profile UID, generation and, for pack
// sources, the trust fingerprint of the profile's namespace, in a bounded LRU (MemoSize entries;
// a pack source's verification is additionally cached by (digest, policy) inside the
// SourceVerifier). An evicted profile is simply verified again on its next use.
type Resolver struct {
	// Verifier verifies OCI sources. When nil, OCI sources are refused.
	Verifier SourceVerifier
	// RequireProvenance refuses inline sources (the production default).
	RequireProvenance bool
	// CacheHits and CacheMisses count the resolutions of OCI sources answered from the memo and
	// those verified afresh. Optional.
	CacheHits, CacheMisses prometheus.Counter
	// MemoSize bounds the memo of verified profiles (zero or negative: defaultResolverMemoSize).
	// Read once, on first use.
	MemoSize int

	once sync.Once
	memo *lru.Cache[resolveKey, *Resolved]
}

type resolveKey struct {
	uid        types.UID
	generation int64
	trust      string
}

// defaultResolverMemoSize is the default Resolver.MemoSize.
const defaultResolverMemoSize = 4096

// cache returns the memo, creating it on first use.
func (r *Resolver) cache() *lru.Cache[resolveKey, *Resolved] {
	r.once.Do(func() {
		size := r.MemoSize
		if size < 1 {
			size = defaultResolverMemoSize
		}
		r.memo = lru.New[resolveKey, *Resolved](size)
	})
	return r.memo
}

// Resolve verifies the profile's source and document. A nil *StageError means success.
func (r *Resolver) Resolve(ctx context.Context, p *v1.McpServiceProfile) (*Resolved, *StageError) {
	key := resolveKey{uid: p.UID, generation: p.Generation}
	if tf, ok := r.Verifier.(TrustFingerprinter); ok && p.Spec.Source.OCI != nil && key.uid != "" {
		fp, err := tf.TrustFingerprint(ctx, p.Namespace)
		if err != nil {
			key.uid = "" // trust unknown: resolve afresh, memoize nothing
		}
		key.trust = fp
	}
	if key.uid != "" {
		if res, ok := r.cache().Get(key); ok {
			if r.CacheHits != nil && p.Spec.Source.OCI != nil {
				r.CacheHits.Inc()
			}
			return res, nil
		}
	}
	if r.CacheMisses != nil && p.Spec.Source.OCI != nil {
		r.CacheMisses.Inc()
	}
	res, serr := r.resolve(ctx, p)
	if serr != nil {
		return nil, serr
	}
	if key.uid != "" {
		r.cache().Add(key, res)
	}
	return res, nil
}

func (r *Resolver) resolve(ctx context.Context, p *v1.McpServiceProfile) (*Resolved, *StageError) {
	src := p.Spec.Source
	res := &Resolved{}
	switch {
	case src.Inline != nil:
		if r.RequireProvenance {
			return nil, InlineSourceRefused.New(
				"the cluster requires pack provenance; inline profiles are for development clusters only")
		}
		// A private copy: p may be a read-only view of the informer cache.
		res.Document = src.Inline.DeepCopy()
	case src.OCI != nil:
		if r.Verifier == nil {
			return nil, NoPackVerifier.New("this manager has no pack verifier configured")
		}
		req := VerifyRequest{Namespace: p.Namespace, Ref: src.OCI.Ref, PullSecret: src.OCI.PullSecretRef, Policy: src.OCI.Verify}
		vctx, span := tracing.Tracer().Start(ctx, "stage SourceVerified", trace.WithAttributes(tracing.KeyStage.String(v1.ConditionSourceVerified)))
		vs, err := r.Verifier.VerifyPack(vctx, req)
		if err != nil {
			serr := ClassifyVerifyError(req, err)
			tracing.EndWithReason(span, serr.Reason(), refusal.Name(serr))
			return nil, serr
		}
		tracing.EndWithReason(span, "", "")
		res.Document, res.Snapshot, res.PackDigest, res.ProfileDigest = vs.Document, vs.Snapshot, vs.PackDigest, vs.ProfileDigest
		prov := vs.Provenance
		res.Provenance = &prov
	default:
		return nil, ProfileInvalid.New("the profile names no source")
	}
	// A pack's document was checked, and its snapshot reconstructed, when it was pulled.
	if res.Snapshot == nil {
		rec, serr := CheckProfile(res.Document)
		if serr != nil {
			return nil, serr
		}
		res.Snapshot = rec
	}
	if res.ProfileDigest == "" {
		d, err := ocipack.ProfileDigest(res.Document)
		if err != nil {
			return nil, ProfileInvalid.Wrap(err, "the profile document does not encode: %s", RefusalText(err, "invalid"))
		}
		res.ProfileDigest = d
	}
	return res, nil
}
