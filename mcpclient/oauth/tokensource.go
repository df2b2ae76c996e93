package oauth

import (
	"context"
	"errors"
	"sync"
	"time"

	"golang.org/x/oauth2"
)

// storeSource is the token source of one stored credential: it refreshes at the credential's
// own token endpoint (through the handler's guarded client) and writes every new token back to
// the store under the same key. A failed refresh leaves the stored credential untouched.
type storeSource struct {
	h *Handler

	mu      sync.Mutex
	cred    *Credential
	base    oauth2.TokenSource
	pending bool // a refreshed token not yet persisted
}

func (h *Handler) newStoreSource(c *Credential) *storeSource {
	s := &storeSource{h: h, cred: c.clone()}
	s.base = s.config().TokenSource(s.refreshContext(), c.token())
	return s
}

func (s *storeSource) config() *oauth2.Config {
	return &oauth2.Config{
		ClientID:     s.cred.ClientID,
		ClientSecret: s.cred.ClientSecret,
		Endpoint:     oauth2.Endpoint{TokenURL: s.cred.TokenURL, AuthStyle: oauth2.AuthStyle(s.cred.AuthStyle)},
		Scopes:       s.cred.Scopes,
	}
}

// refreshContext outlives any one request (oauth2 keeps it for every later refresh) and carries
// the guarded HTTP client.
func (s *storeSource) refreshContext() context.Context {
	return context.WithValue(context.Background(), oauth2.HTTPClient, s.h.client)
}

func (s *storeSource) snapshot() *Credential {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cred.clone()
}

// Token implements [oauth2.TokenSource]. A refresh answered with invalid_grant is reported as
// an [*oauth2.RetrieveError] with only that code (the SDK transport then sends the request
// without a token and re-authorizes on the 401); any other failure is a [*RefreshError].
func (s *storeSource) Token() (*oauth2.Token, error) {
	s.mu.Lock()
	base := s.base
	s.mu.Unlock()
	t, err := base.Token()
	if err != nil {
		return nil, sanitizeRefresh(err)
	}
	s.record(t)
	return t, nil
}

// refresh forces a refresh now, whatever the expiry, and persists the result.
func (s *storeSource) refresh() (*oauth2.Token, error) {
	s.mu.Lock()
	old := s.cred.token()
	old.Expiry = time.Unix(1, 0) // force
	base := s.config().TokenSource(s.refreshContext(), old)
	s.mu.Unlock()
	t, err := base.Token()
	if err != nil {
		return nil, sanitizeRefresh(err)
	}
	s.mu.Lock()
	s.base = s.config().TokenSource(s.refreshContext(), t)
	s.mu.Unlock()
	s.record(t)
	return t, nil
}

// record persists t if it differs from the stored token (or an earlier save failed).
func (s *storeSource) record(t *oauth2.Token) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.pending && t.AccessToken == s.cred.AccessToken && t.RefreshToken == s.cred.RefreshToken {
		return
	}
	c := s.cred.clone()
	c.AccessToken, c.TokenType, c.Expiry = t.AccessToken, t.TokenType, t.Expiry
	if t.RefreshToken != "" {
		c.RefreshToken = t.RefreshToken
	}
	c.Updated = time.Now().UTC()
	s.cred = c
	// A failed write is retried on the next call; the token is still good for this request.
	s.pending = s.h.opts.Store.Save(context.Background(), c) != nil
}

func sanitizeRefresh(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		code := sanitizeCode(re.ErrorCode)
		if code == "invalid_grant" {
			return &oauth2.RetrieveError{ErrorCode: code}
		}
		return &RefreshError{Code: code}
	}
	return &RefreshError{}
}
