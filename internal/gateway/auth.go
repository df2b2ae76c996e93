package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"go.opentelemetry.io/otel/trace"

	"github.com/b10x/connector-mcp/internal/invocation"
	"github.com/b10x/connector-mcp/internal/lru"
	"github.com/b10x/connector-mcp/internal/tracing"
)

// DefaultAudience is the audience a caller's ServiceAccount token must be issued for.
const DefaultAudience = "connector-mcp"

// DefaultTokenCacheTTL is the default ceiling of how long one TokenReview result is reused.
const DefaultTokenCacheTTL = 5 * time.Minute

// DefaultMaxTokenCacheEntries is the default TokenAuthenticator.MaxCacheEntries: when the cache
// is full, the least recently used entry is evicted.
const DefaultMaxTokenCacheEntries = 65536

// Defaults of the per-source limit on failed authentications.
const (
	// DefaultAuthFailureRate is the default TokenAuthenticator.FailureRate: failed TokenReviews
	// one source may cause per second once its burst is spent.
	DefaultAuthFailureRate = 1.0
	// DefaultAuthFailureBurst is the default TokenAuthenticator.FailureBurst.
	DefaultAuthFailureBurst = 10
	// DefaultNegativeTokenCacheTTL is the default TokenAuthenticator.NegativeCacheTTL: how long
	// a token the apiserver refused is refused again without a TokenReview.
	DefaultNegativeTokenCacheTTL = 10 * time.Second
	// maxRateLimitSources bounds the sources whose failure buckets are kept (least recently used
	// evicted); maxNegativeTokenEntries bounds the negative cache.
	maxRateLimitSources     = 16384
	maxNegativeTokenEntries = 16384
)

// maxTokenBytes bounds a bearer token: anything longer is refused without a TokenReview.
const maxTokenBytes = 16 << 10

// TokenAuthenticator authenticates bearer tokens with a Kubernetes TokenReview for Audience.
// Results are cached by the SHA-256 of the token for at most the token's remaining life (the
// "exp" claim of a JWT, read only after the apiserver authenticated it) and at most CacheTTL; a
// full cache evicts its least recently used entry. A token the apiserver refused is remembered
// (by its hash) for NegativeCacheTTL and refused again without a TokenReview. Failed TokenReviews
// are limited per source (the address the gateway sees, put on the context by WithSource): each
// uncached review takes a token from the source's bucket (FailureBurst, refilled at FailureRate
// per second) and a successful one gives it back, so a flood of bogus tokens from one source
// causes at most the burst of TokenReviews and is then refused authentication_rate_limited
// without one; other sources are not affected. Unavailable-apiserver failures are never cached.
// It is safe for concurrent use.
type TokenAuthenticator struct {
	// Client creates TokenReviews (never cached).
	Client client.Client
	// Audience is the audience the token must be bound to (empty: DefaultAudience).
	Audience string
	// CacheTTL is the ceiling of a cache entry's life (zero: DefaultTokenCacheTTL; negative:
	// no caching).
	CacheTTL time.Duration
	// MaxCacheEntries bounds the cache (zero: DefaultMaxTokenCacheEntries).
	MaxCacheEntries int
	// NegativeCacheTTL is how long a refused token is refused without a TokenReview (zero:
	// DefaultNegativeTokenCacheTTL; negative: refused tokens are not remembered).
	NegativeCacheTTL time.Duration
	// FailureRate is how many failed TokenReviews per second one source may cause once its
	// burst is spent (zero: DefaultAuthFailureRate; negative: no per-source limit).
	FailureRate float64
	// FailureBurst is the size of a source's bucket (zero: DefaultAuthFailureBurst).
	FailureBurst int
	// Clock is the time source (nil: the real clock).
	Clock clock.PassiveClock
	// OnLookup, when set, is told whether each authentication was a cache hit.
	OnLookup func(hit bool)
	// OnReview, when set, is told the result of each TokenReview made (a TokenReview constant).
	OnReview func(result string)

	once     sync.Once
	cache    *lru.Cache[[32]byte, tokenEntry]
	negative *lru.Cache[[32]byte, time.Time]
	sources  *lru.Cache[string, *bucket]
	hits     atomic.Int64
}

type tokenEntry struct {
	caller  invocation.Caller
	expires time.Time
}

type sourceKey struct{}

// WithSource returns ctx carrying source, the address a request came from as the gateway sees it
// (the remote IP; behind a proxy, the proxy's): TokenAuthenticator limits failed TokenReviews per
// source.
func WithSource(ctx context.Context, source string) context.Context {
	return context.WithValue(ctx, sourceKey{}, source)
}

// SourceFrom returns the source WithSource put on ctx ("" when none).
func SourceFrom(ctx context.Context) string {
	s, _ := ctx.Value(sourceKey{}).(string)
	return s
}

func (a *TokenAuthenticator) init() {
	a.once.Do(func() {
		n := a.MaxCacheEntries
		if n <= 0 {
			n = DefaultMaxTokenCacheEntries
		}
		a.cache = lru.New[[32]byte, tokenEntry](n)
		a.negative = lru.New[[32]byte, time.Time](maxNegativeTokenEntries)
		a.sources = lru.New[string, *bucket](maxRateLimitSources)
	})
}

// Authenticate returns the caller the token authenticates. Refusals are *AuthError.
func (a *TokenAuthenticator) Authenticate(ctx context.Context, token string) (invocation.Caller, error) {
	if token == "" || len(token) > maxTokenBytes {
		return invocation.Caller{}, &AuthError{Err: ErrUnauthenticated}
	}
	a.init()
	now := a.now()
	key := sha256.Sum256([]byte(token))
	span := trace.SpanFromContext(ctx)
	if e, ok := a.cache.Get(key); ok && now.Before(e.expires) {
		span.SetAttributes(tracing.KeyCache.String("hit"))
		a.hits.Add(1)
		if a.OnLookup != nil {
			a.OnLookup(true)
		}
		return e.caller, nil
	}
	if a.OnLookup != nil {
		a.OnLookup(false)
	}
	if until, ok := a.negative.Get(key); ok {
		if now.Before(until) {
			return invocation.Caller{}, &AuthError{Err: ErrUnauthenticated}
		}
		a.negative.Remove(key)
	}
	b := a.bucketOf(SourceFrom(ctx))
	if b != nil {
		if wait, ok := b.take(now); !ok {
			return invocation.Caller{}, &AuthError{Err: ErrAuthRateLimited, RetryAfter: wait}
		}
	}
	span.SetAttributes(tracing.KeyCache.String("miss"))
	caller, err := a.review(ctx, token)
	if err != nil {
		if nttl := a.negativeTTL(); nttl > 0 && (errors.Is(err, ErrUnauthenticated) || errors.Is(err, ErrAudience)) {
			a.negative.Add(key, now.Add(nttl))
		}
		return invocation.Caller{}, err
	}
	if b != nil {
		b.refund()
	}
	ttl := a.CacheTTL
	if ttl == 0 {
		ttl = DefaultTokenCacheTTL
	}
	if ttl > 0 {
		expires := now.Add(ttl)
		if exp, ok := jwtExpiry(token); ok && exp.Before(expires) {
			expires = exp
		}
		if now.Before(expires) {
			a.cache.Add(key, tokenEntry{caller: caller, expires: expires})
		}
	}
	return caller, nil
}

// Precheck refuses, before the request takes a slot, what Authenticate would refuse without a
// TokenReview: a token remembered as refused (ErrUnauthenticated) and an uncached token from a
// source whose failure bucket is empty (ErrAuthRateLimited). It takes nothing from the bucket;
// nil means "authenticate".
func (a *TokenAuthenticator) Precheck(ctx context.Context, token string) error {
	if token == "" || len(token) > maxTokenBytes {
		return &AuthError{Err: ErrUnauthenticated}
	}
	a.init()
	now := a.now()
	key := sha256.Sum256([]byte(token))
	if e, ok := a.cache.Get(key); ok && now.Before(e.expires) {
		return nil
	}
	if until, ok := a.negative.Get(key); ok && now.Before(until) {
		return &AuthError{Err: ErrUnauthenticated}
	}
	if b := a.bucketOf(SourceFrom(ctx)); b != nil {
		if wait, ok := b.peek(now); !ok {
			return &AuthError{Err: ErrAuthRateLimited, RetryAfter: wait}
		}
	}
	return nil
}

func (a *TokenAuthenticator) negativeTTL() time.Duration {
	if a.NegativeCacheTTL == 0 {
		return DefaultNegativeTokenCacheTTL
	}
	return a.NegativeCacheTTL
}

// bucketOf returns the failure bucket of source (nil: no limit).
func (a *TokenAuthenticator) bucketOf(source string) *bucket {
	if a.FailureRate < 0 {
		return nil
	}
	rate, burst := a.FailureRate, a.FailureBurst
	if rate == 0 {
		rate = DefaultAuthFailureRate
	}
	if burst <= 0 {
		burst = DefaultAuthFailureBurst
	}
	now := a.now()
	b, _ := a.sources.GetOrAdd(source, func() *bucket {
		return &bucket{rate: rate, burst: float64(burst), tokens: float64(burst), last: now}
	})
	return b
}

// bucket is a token bucket: burst tokens, refilled at rate per second.
type bucket struct {
	mu          sync.Mutex
	rate, burst float64
	tokens      float64
	last        time.Time
}

// take takes one token at now; when there is none it says how long until there is one.
func (b *bucket) take(now time.Time) (time.Duration, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.After(b.last) {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return 0, true
	}
	return time.Duration((1 - b.tokens) / b.rate * float64(time.Second)), false
}

// peek reports, without taking it, whether a token is there at now, or how long until there is.
func (b *bucket) peek(now time.Time) (time.Duration, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	tokens := b.tokens
	if now.After(b.last) {
		tokens = min(b.burst, tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	if tokens >= 1 {
		return 0, true
	}
	return time.Duration((1 - tokens) / b.rate * float64(time.Second)), false
}

// refund gives back the token of a review that authenticated.
func (b *bucket) refund() {
	b.mu.Lock()
	b.tokens = min(b.burst, b.tokens+1)
	b.mu.Unlock()
}

// review asks the apiserver.
func (a *TokenAuthenticator) review(ctx context.Context, token string) (invocation.Caller, error) {
	aud := a.audience()
	tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{aud}}}
	if err := a.Client.Create(ctx, tr); err != nil {
		a.reviewed(TokenReviewError)
		// The apiserver's error names no token; still, only its kind is kept.
		return invocation.Caller{}, &AuthError{Err: fmt.Errorf("%w: %s", ErrTokenReviewUnavailable, reasonOf(err))}
	}
	st := tr.Status
	if !st.Authenticated || st.User.Username == "" {
		a.reviewed(TokenReviewUnauthenticated)
		return invocation.Caller{}, &AuthError{Err: ErrUnauthenticated}
	}
	if !slices.Contains(st.Audiences, aud) {
		a.reviewed(TokenReviewWrongAudience)
		return invocation.Caller{}, &AuthError{Err: ErrAudience}
	}
	a.reviewed(TokenReviewAuthenticated)
	c := invocation.Caller{User: st.User.Username, UID: st.User.UID, Groups: slices.Clone(st.User.Groups)}
	if len(st.User.Extra) > 0 {
		c.Extra = make(map[string][]string, len(st.User.Extra))
		for k, v := range st.User.Extra {
			c.Extra[k] = slices.Clone([]string(v))
		}
	}
	c.Seed = invocation.IdentitySeed(c)
	return c, nil
}

// reviewed reports a TokenReview's result to OnReview.
func (a *TokenAuthenticator) reviewed(result string) {
	if a.OnReview != nil {
		a.OnReview(result)
	}
}

// CacheHits returns the number of authentications answered from the cache.
func (a *TokenAuthenticator) CacheHits() int64 { return a.hits.Load() }

func (a *TokenAuthenticator) audience() string {
	if a.Audience == "" {
		return DefaultAudience
	}
	return a.Audience
}

func (a *TokenAuthenticator) now() time.Time {
	if a.Clock == nil {
		return time.Now()
	}
	return a.Clock.Now()
}

// jwtExpiry reads the "exp" claim of a JWT without verifying it: it only shortens the cache life
// of a token the apiserver has just authenticated.
func jwtExpiry(token string) (time.Time, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp *json.Number `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Exp == nil {
		return time.Time{}, false
	}
	sec, err := claims.Exp.Int64()
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(sec, 0), true
}
