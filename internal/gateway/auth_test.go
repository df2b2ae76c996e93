package gateway

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/b10x/connector-mcp/internal/invocation"
)

// reviewAPI answers TokenReviews like the apiserver would for tokens it knows: audiences is the
// audiences each token was issued for. It counts reviews.
type reviewAPI struct {
	tokens  map[string][]string
	reviews int
	fail    bool
}

func (r *reviewAPI) client() client.Client {
	return fake.NewClientBuilder().WithScheme(runtime.NewScheme()).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			tr := obj.(*authenticationv1.TokenReview)
			r.reviews++
			if r.fail {
				return apierrors.NewServiceUnavailable("etcd is down; token " + tr.Spec.Token)
			}
			auds, ok := r.tokens[tr.Spec.Token]
			if !ok {
				tr.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token " + tr.Spec.Token}
				return nil
			}
			if len(auds) == 1 && auds[0] == "*legacy-authenticator*" {
				// An authenticator that ignores the requested audiences answers with its own.
				tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, Audiences: []string{"https://kubernetes.default.svc"},
					User: authenticationv1.UserInfo{Username: "legacy-user"}}
				return nil
			}
			var match []string
			for _, want := range tr.Spec.Audiences {
				for _, a := range auds {
					if a == want {
						match = append(match, a)
					}
				}
			}
			if len(match) == 0 {
				tr.Status = authenticationv1.TokenReviewStatus{Error: "token audiences do not match"}
				return nil
			}
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, Audiences: match,
				User: authenticationv1.UserInfo{Username: "system:serviceaccount:team-a:agent", UID: "uid-1", Groups: []string{"system:serviceaccounts"}}}
			return nil
		},
	}).Build()
}

// jwtWithExp builds a JWT-shaped token with an exp claim (the signature is not checked here: the
// apiserver did that).
func jwtWithExp(exp time.Time) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(fmt.Sprintf(`{"exp":%d,"aud":["connector-mcp"]}`, exp.Unix()))) + ".sig"
}

func TestTokenAuthenticatorCachesWithinBounds(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	short := jwtWithExp(clk.Now().Add(30 * time.Second))
	long := jwtWithExp(clk.Now().Add(time.Hour))
	api := &reviewAPI{tokens: map[string][]string{short: {"connector-mcp"}, long: {"connector-mcp"}}}
	a := &TokenAuthenticator{Client: api.client(), CacheTTL: time.Minute, Clock: clk}
	ctx := context.Background()
	for range 3 {
		c, err := a.Authenticate(ctx, long)
		if err != nil || c.User != "system:serviceaccount:team-a:agent" || c.Seed != "uid:uid-1" || len(c.Groups) != 1 {
			t.Fatalf("Authenticate = %+v, %v", c, err)
		}
		if _, err := a.Authenticate(ctx, short); err != nil {
			t.Fatal(err)
		}
	}
	if api.reviews != 2 {
		t.Fatalf("%d TokenReviews for 2 tokens authenticated 3 times: the cache is not used", api.reviews)
	}
	// The short token's entry ends with the token (30s), before the ceiling (1m).
	clk.SetTime(clk.Now().Add(31 * time.Second))
	_, _ = a.Authenticate(ctx, short)
	_, _ = a.Authenticate(ctx, long)
	if api.reviews != 3 {
		t.Fatalf("reviews = %d, want only the expired token re-reviewed", api.reviews)
	}
	// The long token's entry ends at the ceiling.
	clk.SetTime(clk.Now().Add(30 * time.Second))
	_, _ = a.Authenticate(ctx, long)
	if api.reviews != 4 {
		t.Fatalf("reviews = %d, want the long token re-reviewed at the ceiling", api.reviews)
	}
}

// TestTokenAuthenticatorRefuses is the must-fail twin: no token, an unknown token, a token for
// another audience, and an unavailable apiserver are refused as unauthenticated, never cached as
// authenticated (a refused token is remembered as refused), and the error never carries the
// token.
func TestTokenAuthenticatorRefuses(t *testing.T) {
	other := jwtWithExp(time.Now().Add(time.Hour))
	api := &reviewAPI{tokens: map[string][]string{other: {"vault"}, "legacy-token": {"*legacy-authenticator*"}}}
	m := NewMetrics(nil)
	a := &TokenAuthenticator{Client: api.client(), OnReview: m.TokenReviewHook()}
	ctx := context.Background()
	cases := []struct {
		token string
		want  error
	}{
		{"", ErrUnauthenticated},
		{"garbage-token", ErrUnauthenticated},
		{other, ErrUnauthenticated},
		{other, ErrUnauthenticated}, // answered from the negative cache
		{"legacy-token", ErrAudience},
	}
	for _, c := range cases {
		_, err := a.Authenticate(ctx, c.token)
		var ae *AuthError
		if !errors.Is(err, c.want) || !errors.As(err, &ae) || ae.Refusal() != RefusalUnauthenticated {
			t.Fatalf("Authenticate(%q) = %v, want %v", c.token, err, c.want)
		}
		if c.token != "" && containsStr(err.Error(), c.token) {
			t.Fatalf("the error carries the token: %v", err)
		}
	}
	if api.reviews != 3 {
		t.Fatalf("reviews = %d, want 3 (empty token never reviewed, a refused token refused again from the negative cache)", api.reviews)
	}
	api.fail = true
	fresh := jwtWithExp(time.Now().Add(2 * time.Hour))
	for range 2 { // an unavailable apiserver is never cached: both are reviewed
		_, err := a.Authenticate(ctx, fresh)
		if !errors.Is(err, ErrTokenReviewUnavailable) || containsStr(err.Error(), fresh) {
			t.Fatalf("unavailable apiserver: %v", err)
		}
	}
	if api.reviews != 5 {
		t.Fatalf("reviews = %d, want 5 (unavailable answers are not cached)", api.reviews)
	}
	// Each TokenReview made is counted by result: the alert on token-review failures reads these.
	for result, want := range map[string]float64{TokenReviewUnauthenticated: 2, TokenReviewWrongAudience: 1, TokenReviewError: 2, TokenReviewAuthenticated: 0} {
		if got := testutil.ToFloat64(m.TokenReviews.WithLabelValues(result)); got != want {
			t.Errorf("token reviews %s = %v, want %v", result, got, want)
		}
	}
}

func TestCachingAuthorizerTTL(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	allowed, asks := true, 0
	a := &CachingAuthorizer{TTL: 10 * time.Second, Clock: clk, Next: invocation.AuthorizerFunc(func(context.Context, invocation.Caller, invocation.Target) (bool, error) {
		asks++
		return allowed, nil
	})}
	ctx := context.Background()
	c := invocation.Caller{User: "u", UID: "1", Seed: "uid:1"}
	tgt := invocation.Target{Namespace: "ns", Name: "d"}
	for range 3 {
		if ok, err := a.Authorize(ctx, c, tgt); !ok || err != nil {
			t.Fatalf("Authorize = %v, %v", ok, err)
		}
	}
	if asks != 1 {
		t.Fatalf("asks = %d, want 1 within the TTL", asks)
	}
	// Another group membership is another identity: not answered from this entry.
	if _, err := a.Authorize(ctx, invocation.Caller{User: "u", UID: "1", Seed: "uid:1", Groups: []string{"g"}}, tgt); err != nil || asks != 2 {
		t.Fatalf("asks = %d: a different identity was answered from the cache", asks)
	}
	// Revocation takes effect once the TTL passes, not before.
	allowed = false
	clk.SetTime(clk.Now().Add(9 * time.Second))
	if ok, _ := a.Authorize(ctx, c, tgt); !ok {
		t.Fatal("the cached decision ended before the TTL")
	}
	clk.SetTime(clk.Now().Add(2 * time.Second))
	if ok, _ := a.Authorize(ctx, c, tgt); ok {
		t.Fatal("a revoked grant is still allowed after the TTL")
	}
}

// TestCachingAuthorizerErrorsNotCached is the twin: an undecidable review fails closed, is not
// cached, and its text is only the status reason.
func TestCachingAuthorizerErrorsNotCached(t *testing.T) {
	asks := 0
	a := &CachingAuthorizer{Next: invocation.AuthorizerFunc(func(context.Context, invocation.Caller, invocation.Target) (bool, error) {
		asks++
		return false, apierrors.NewInternalError(errors.New("upstream said: secret-detail"))
	})}
	for range 2 {
		ok, err := a.Authorize(context.Background(), invocation.Caller{User: "u", Seed: "s"}, invocation.Target{Namespace: "n", Name: "d"})
		if ok || err == nil || containsStr(err.Error(), "secret-detail") {
			t.Fatalf("Authorize = %v, %v", ok, err)
		}
	}
	if asks != 2 {
		t.Fatalf("asks = %d: an error was cached", asks)
	}
}

func containsStr(s, sub string) bool {
	return len(sub) > 0 && len(s) >= len(sub) && (func() bool {
		for i := 0; i+len(sub) <= len(s); i++ {
			if s[i:i+len(sub)] == sub {
				return true
			}
		}
		return false
	})()
}

// TestAuthzKeyIdentity: the decision cache key is the caller identity and target, whatever the
// order of groups and extra; the twin: every field, and where one field ends, changes it.
func TestAuthzKeyIdentity(t *testing.T) {
	base := invocation.Caller{User: "u", UID: "id", Groups: []string{"b", "a"}, Extra: map[string][]string{"x": {"1", "2"}, "y": {"3"}}}
	target := invocation.Target{Namespace: "ns", Name: "n"}
	same := invocation.Caller{User: "u", UID: "id", Groups: []string{"a", "b"}, Extra: map[string][]string{"y": {"3"}, "x": {"1", "2"}}}
	if authzKey(base, target) != authzKey(same, target) {
		t.Fatal("group or extra order changed the key")
	}
	if base.Groups[0] != "b" {
		t.Fatal("authzKey sorted the caller's groups in place")
	}
	for name, tc := range map[string]struct {
		c invocation.Caller
		t invocation.Target
	}{
		"user":                {invocation.Caller{User: "v", UID: "id", Groups: base.Groups, Extra: base.Extra}, target},
		"uid":                 {invocation.Caller{User: "u", UID: "other", Groups: base.Groups, Extra: base.Extra}, target},
		"user/uid boundary":   {invocation.Caller{User: "ui", UID: "d", Groups: base.Groups, Extra: base.Extra}, target},
		"group":               {invocation.Caller{User: "u", UID: "id", Groups: []string{"a"}, Extra: base.Extra}, target},
		"group boundary":      {invocation.Caller{User: "u", UID: "id", Groups: []string{"ab"}, Extra: base.Extra}, target},
		"extra value":         {invocation.Caller{User: "u", UID: "id", Groups: base.Groups, Extra: map[string][]string{"x": {"1"}, "y": {"3"}}}, target},
		"extra value moved":   {invocation.Caller{User: "u", UID: "id", Groups: base.Groups, Extra: map[string][]string{"x": {"1"}, "y": {"2", "3"}}}, target},
		"no extra":            {invocation.Caller{User: "u", UID: "id", Groups: base.Groups}, target},
		"namespace":           {base, invocation.Target{Namespace: "other", Name: "n"}},
		"namespace/name edge": {base, invocation.Target{Namespace: "nsn", Name: ""}},
	} {
		if authzKey(tc.c, tc.t) == authzKey(base, target) {
			t.Errorf("%s: same key as the base identity", name)
		}
	}
}
