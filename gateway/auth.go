package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/b10x/connector-mcp/invocation"
)

// DefaultAudience is the audience a caller's ServiceAccount token must be issued for.
const DefaultAudience = "connector-mcp"

// DefaultTokenCacheTTL is the default ceiling of how long one TokenReview result is reused.
const DefaultTokenCacheTTL = 5 * time.Minute

// maxTokenCacheEntries bounds the token cache; when full, expired entries are dropped and, if
// that is not enough, the cache starts over.
const maxTokenCacheEntries = 65536

// maxTokenBytes bounds a bearer token: anything longer is refused without a TokenReview.
const maxTokenBytes = 16 << 10

// TokenAuthenticator authenticates bearer tokens with a Kubernetes TokenReview for Audience.
// Results are cached by the SHA-256 of the token for at most the token's remaining life (the
// "exp" claim of a JWT, read only after the apiserver authenticated it) and at most CacheTTL.
// Failures are never cached. It is safe for concurrent use.
type TokenAuthenticator struct {
	// Client creates TokenReviews (never cached).
	Client client.Client
	// Audience is the audience the token must be bound to (empty: DefaultAudience).
	Audience string
	// CacheTTL is the ceiling of a cache entry's life (zero: DefaultTokenCacheTTL; negative:
	// no caching).
	CacheTTL time.Duration
	// Clock is the time source (nil: the real clock).
	Clock clock.PassiveClock
	// OnLookup, when set, is told whether each authentication was a cache hit.
	OnLookup func(hit bool)

	mu    sync.Mutex
	cache map[[32]byte]tokenEntry
	hits  atomic.Int64
}

type tokenEntry struct {
	caller  invocation.Caller
	expires time.Time
}

// Authenticate returns the caller the token authenticates. Refusals are *AuthError.
func (a *TokenAuthenticator) Authenticate(ctx context.Context, token string) (invocation.Caller, error) {
	if token == "" || len(token) > maxTokenBytes {
		return invocation.Caller{}, &AuthError{Err: ErrUnauthenticated}
	}
	now := a.now()
	key := sha256.Sum256([]byte(token))
	a.mu.Lock()
	e, ok := a.cache[key]
	if ok && now.Before(e.expires) {
		a.mu.Unlock()
		a.hits.Add(1)
		if a.OnLookup != nil {
			a.OnLookup(true)
		}
		return e.caller, nil
	}
	a.mu.Unlock()
	if a.OnLookup != nil {
		a.OnLookup(false)
	}
	caller, err := a.review(ctx, token)
	if err != nil {
		return invocation.Caller{}, err
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
			a.mu.Lock()
			if a.cache == nil {
				a.cache = map[[32]byte]tokenEntry{}
			}
			if len(a.cache) >= maxTokenCacheEntries {
				for k, v := range a.cache {
					if !now.Before(v.expires) {
						delete(a.cache, k)
					}
				}
				if len(a.cache) >= maxTokenCacheEntries {
					a.cache = map[[32]byte]tokenEntry{}
				}
			}
			a.cache[key] = tokenEntry{caller: caller, expires: expires}
			a.mu.Unlock()
		}
	}
	return caller, nil
}

// review asks the apiserver.
func (a *TokenAuthenticator) review(ctx context.Context, token string) (invocation.Caller, error) {
	aud := a.audience()
	tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{aud}}}
	if err := a.Client.Create(ctx, tr); err != nil {
		// The apiserver's error names no token; still, only its kind is kept.
		return invocation.Caller{}, &AuthError{Err: fmt.Errorf("%w: %s", ErrTokenReviewUnavailable, reasonOf(err))}
	}
	st := tr.Status
	if !st.Authenticated || st.User.Username == "" {
		return invocation.Caller{}, &AuthError{Err: ErrUnauthenticated}
	}
	if !slices.Contains(st.Audiences, aud) {
		return invocation.Caller{}, &AuthError{Err: ErrAudience}
	}
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
