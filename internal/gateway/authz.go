package gateway

import (
	"context"
	"crypto/sha256"
	"hash"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"

	"go.opentelemetry.io/otel/trace"

	"github.com/b10x/connector-mcp/internal/invocation"
	"github.com/b10x/connector-mcp/internal/lru"
	"github.com/b10x/connector-mcp/internal/tracing"
)

// DefaultAuthzCacheTTL is the default CachingAuthorizer.TTL: revoking a RoleBinding takes effect
// within it.
const DefaultAuthzCacheTTL = 10 * time.Second

// DefaultMaxAuthzCacheEntries is the default CachingAuthorizer.MaxEntries: when the cache is
// full, the least recently used decision is evicted (never the whole cache at once).
const DefaultMaxAuthzCacheEntries = 65536

// CachingAuthorizer caches the decisions of Next (the SubjectAccessReviewer) per caller identity
// (user, UID, groups, extra) and target for at most TTL. Both allow and deny are cached, so a
// granted or revoked RoleBinding takes effect within TTL; errors are never cached. A full cache
// evicts its least recently used decision. It is safe for concurrent use.
type CachingAuthorizer struct {
	// Next decides on a cache miss.
	Next invocation.Authorizer
	// TTL bounds a decision's life (zero: DefaultAuthzCacheTTL; negative: no caching).
	TTL time.Duration
	// MaxEntries bounds the cache (zero: DefaultMaxAuthzCacheEntries).
	MaxEntries int
	// Clock is the time source (nil: the real clock).
	Clock clock.PassiveClock
	// OnLookup, when set, is told whether each decision was a cache hit.
	OnLookup func(hit bool)

	once  sync.Once
	cache *lru.Cache[[32]byte, authzEntry]
}

var _ invocation.Authorizer = (*CachingAuthorizer)(nil)

type authzEntry struct {
	allowed bool
	expires time.Time
}

// Authorize answers from the cache or asks Next.
func (a *CachingAuthorizer) Authorize(ctx context.Context, caller invocation.Caller, target invocation.Target) (bool, error) {
	ttl := a.TTL
	if ttl == 0 {
		ttl = DefaultAuthzCacheTTL
	}
	if ttl < 0 {
		return a.Next.Authorize(ctx, caller, target)
	}
	a.once.Do(func() {
		n := a.MaxEntries
		if n <= 0 {
			n = DefaultMaxAuthzCacheEntries
		}
		a.cache = lru.New[[32]byte, authzEntry](n)
	})
	now := a.now()
	key := authzKey(caller, target)
	e, ok := a.cache.Get(key)
	span := trace.SpanFromContext(ctx)
	if ok && now.Before(e.expires) {
		span.SetAttributes(tracing.KeyCache.String("hit"))
		if a.OnLookup != nil {
			a.OnLookup(true)
		}
		return e.allowed, nil
	}
	if a.OnLookup != nil {
		a.OnLookup(false)
	}
	span.SetAttributes(tracing.KeyCache.String("miss"))
	allowed, err := a.Next.Authorize(ctx, caller, target)
	if err != nil {
		return false, sanitizeAuthz(err)
	}
	a.cache.Add(key, authzEntry{allowed: allowed, expires: now.Add(ttl)})
	return allowed, nil
}

func (a *CachingAuthorizer) now() time.Time {
	if a.Clock == nil {
		return time.Now()
	}
	return a.Clock.Now()
}

// authzKey hashes everything the SubjectAccessReview is made of.
func authzKey(c invocation.Caller, t invocation.Target) [32]byte {
	k := keyHasher{h: sha256.New()}
	k.str(c.User)
	k.str(c.UID)
	k.str(t.Namespace)
	k.str(t.Name)
	groups := c.Groups
	if !sort.StringsAreSorted(groups) {
		groups = slices.Sorted(slices.Values(groups))
	}
	k.count(len(groups))
	for _, g := range groups {
		k.str(g)
	}
	k.count(len(c.Extra))
	for _, name := range slices.Sorted(maps.Keys(c.Extra)) {
		k.str(name)
		k.count(len(c.Extra[name]))
		for _, v := range c.Extra[name] {
			k.str(v)
		}
	}
	var out [32]byte
	k.h.Sum(out[:0])
	return out
}

// keyHasher writes length-prefixed fields to a hash (the decimal length and a colon, then the
// bytes), so that no two different field sequences hash the same input (user "a" + UID "bc" is
// not user "ab" + UID "c").
type keyHasher struct {
	h   hash.Hash
	buf [24]byte
}

func (k *keyHasher) count(n int) {
	_, _ = k.h.Write(append(strconv.AppendInt(k.buf[:0], int64(n), 10), ':'))
}

func (k *keyHasher) str(s string) {
	k.count(len(s))
	_, _ = io.WriteString(k.h, s)
}

// sanitizeAuthz keeps only the kind of an apiserver failure.
func sanitizeAuthz(err error) error { return reasonError(reasonOf(err)) }

// reasonError is an error whose text is only a status reason.
type reasonError string

func (e reasonError) Error() string { return string(e) }

// reasonOf names an apiserver failure by its status reason only.
func reasonOf(err error) string {
	if r := apierrors.ReasonForError(err); r != "" {
		return string(r)
	}
	if apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) {
		return "Timeout"
	}
	return "Unavailable"
}
