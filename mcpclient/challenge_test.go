package mcpclient

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// TestInsufficientScopeNamesTheScopes: a 403 with a Bearer insufficient_scope challenge surfaces
// as ErrInsufficientScope with the scopes the server asked for (so a human can log in again
// with them), never with the page's text; a plain 403 is only an unexpected status.
func TestInsufficientScopeNamesTheScopes(t *testing.T) {
	serve := func(challenge string) string {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if challenge != "" {
				w.Header().Set("WWW-Authenticate", challenge)
			}
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte("SECRET-PROSE: ask an admin"))
		}))
		t.Cleanup(ts.Close)
		return ts.URL + "/mcp"
	}
	connect := func(url string) error {
		_, err := NewClient(nil).Connect(context.Background(), ServerConfig{HTTP: &HTTPServer{URL: url}})
		return err
	}

	err := connect(serve(`Bearer realm="mcp", error="insufficient_scope", scope="repo:write admin", error_description="SECRET-PROSE"`))
	var te *TransportError
	if !errors.Is(err, ErrInsufficientScope) || !errors.As(err, &te) || te.Status != http.StatusForbidden {
		t.Fatalf("got %v, want ErrInsufficientScope with status 403", err)
	}
	if !slices.Equal(te.Scopes, []string{"repo:write", "admin"}) {
		t.Fatalf("scopes = %q, want [repo:write admin]", te.Scopes)
	}
	if strings.Contains(err.Error(), "SECRET-PROSE") {
		t.Fatalf("error carries server prose: %v", err)
	}

	// Twins: a 403 without the challenge is an unexpected status; a challenge whose scope is not
	// a list of scope-tokens keeps the reason but names no scope.
	if err := connect(serve("")); !errors.Is(err, ErrHTTPStatus) || errors.Is(err, ErrInsufficientScope) {
		t.Fatalf("plain 403: got %v, want ErrHTTPStatus", err)
	}
	err = connect(serve(`Bearer error="insufficient_scope", scope="read \"quoted\" prose"`))
	if !errors.Is(err, ErrInsufficientScope) || !errors.As(err, &te) || te.Scopes != nil {
		t.Fatalf("bad scope list: got %v (scopes %q), want ErrInsufficientScope naming none", err, te.Scopes)
	}
}

func TestInsufficientScopeChallengeParsing(t *testing.T) {
	for _, tc := range []struct {
		in     []string
		scopes []string
		ok     bool
	}{
		{[]string{`Bearer error="insufficient_scope", scope="a b"`}, []string{"a", "b"}, true},
		{[]string{`Basic realm="x"`, `bearer error=insufficient_scope,scope=files:read`}, []string{"files:read"}, true},
		{[]string{`Bearer error="invalid_token"`}, nil, false},
		{[]string{`Bearer error="insufficient_scope"`}, nil, true},
		{[]string{`Bearer error="insufficient_scope", scope="` + strings.Repeat("s", maxChallengeScopeLen+1) + `"`}, nil, true},
		{[]string{`Bearer error="insufficient_scope", scope="` + strings.Repeat("a ", maxChallengeScopes+1) + `"`}, nil, true},
		{[]string{`Bearer error="insufficient_scope", scope="caf` + "\u00e9" + `"`}, nil, true},
		{[]string{`Bearer error="insufficient_scope", scope="unterminated`}, nil, true},
		{[]string{`Bearer scope="a", error="insufficient_scope", scope="b"`}, []string{"a"}, true},
	} {
		scopes, ok := insufficientScope(tc.in)
		if ok != tc.ok || !slices.Equal(scopes, tc.scopes) {
			t.Errorf("%q: got %q %v, want %q %v", tc.in, scopes, ok, tc.scopes, tc.ok)
		}
	}
}
