package oauth

import (
	"context"
	"slices"
	"sort"
	"sync"
	"time"

	"golang.org/x/oauth2"
)

// Key binds a credential to both the protected resource and the authorization server that
// issued it. A credential is presented only to Resource and refreshed only at Issuer.
type Key struct {
	// Resource is the canonical URL of the MCP server (see [CanonicalResource]).
	Resource string `json:"resource"`
	// Issuer is the authorization server's issuer identifier (RFC 8414).
	Issuer string `json:"issuer"`
}

// Credential is a stored OAuth grant for one [Key]. Its String method never shows secrets;
// print it with %v freely, but never marshal it to a log.
type Credential struct {
	Key
	// Audience is the RFC 8707 resource indicator the token was requested for (the resource
	// field of the protected-resource metadata).
	Audience string `json:"audience,omitempty"`
	// TokenURL is the issuer's token endpoint, used for refresh.
	TokenURL string `json:"token_url"`
	// ClientID is the client the grant belongs to.
	ClientID string `json:"client_id"`
	// ClientSecret is the client's secret, for confidential clients.
	ClientSecret string `json:"client_secret,omitempty"`
	// AuthStyle is how the client authenticates at the token endpoint (oauth2.AuthStyle).
	AuthStyle int `json:"auth_style,omitempty"`
	// Scopes are the granted scopes (kept across step-up authorizations).
	Scopes []string `json:"scopes,omitempty"`
	// AccessToken is the bearer token.
	AccessToken string `json:"access_token"`
	// TokenType is the token type ("Bearer").
	TokenType string `json:"token_type,omitempty"`
	// RefreshToken is the refresh token, if one was issued.
	RefreshToken string `json:"refresh_token,omitempty"`
	// Expiry is when the access token expires; zero means unknown.
	Expiry time.Time `json:"expiry,omitzero"`
	// Updated is when the credential was last written.
	Updated time.Time `json:"updated"`
}

// String describes the credential without any secret.
func (c *Credential) String() string {
	return "oauth credential for " + redactURL(c.Resource) + " from " + redactURL(c.Issuer)
}

// GoString describes the credential without any secret (for %#v).
func (c *Credential) GoString() string { return c.String() }

// token returns the oauth2 form of the credential's token.
func (c *Credential) token() *oauth2.Token {
	return &oauth2.Token{AccessToken: c.AccessToken, TokenType: c.TokenType, RefreshToken: c.RefreshToken, Expiry: c.Expiry}
}

// clone returns a deep copy.
func (c *Credential) clone() *Credential {
	d := *c
	d.Scopes = slices.Clone(c.Scopes)
	return &d
}

// Registration is a client registered dynamically (RFC 7591) at one issuer, kept so that
// registration is not repeated on every authorization.
type Registration struct {
	// Issuer is the authorization server the client is registered with.
	Issuer string `json:"issuer"`
	// ClientID is the issued client identifier.
	ClientID string `json:"client_id"`
	// ClientSecret is the issued secret, if any.
	ClientSecret string `json:"client_secret,omitempty"`
	// SecretExpiresAt is when the secret expires; zero means never.
	SecretExpiresAt time.Time `json:"client_secret_expires_at,omitzero"`
	// AuthMethod is the registered token_endpoint_auth_method.
	AuthMethod string `json:"token_endpoint_auth_method,omitempty"`
	// RedirectURIs are the registered redirect URIs.
	RedirectURIs []string `json:"redirect_uris"`
	// Registered is when the registration was made.
	Registered time.Time `json:"registered"`
}

// String describes the registration without the secret.
func (r *Registration) String() string { return "oauth client registration at " + r.Issuer }

// GoString describes the registration without the secret (for %#v).
func (r *Registration) GoString() string { return r.String() }

// Store is credential custody: credentials keyed by (resource, issuer) and dynamic client
// registrations keyed by issuer. The CLI uses [XDGStore]; tests use [MemoryStore]; hosted
// consumers implement it over their own secret store. Implementations must be safe for
// concurrent use and must return [ErrNotFound] (possibly wrapped) for a missing entry.
type Store interface {
	// Load returns the credential stored for key.
	Load(ctx context.Context, key Key) (*Credential, error)
	// Save stores c under c.Key, replacing any previous one atomically.
	Save(ctx context.Context, c *Credential) error
	// Delete removes the credential for key; deleting a missing one is not an error.
	Delete(ctx context.Context, key Key) error
	// List returns the credentials for resource (every credential when resource is ""),
	// most recently updated first.
	List(ctx context.Context, resource string) ([]*Credential, error)
	// LoadRegistration returns the client registration stored for issuer.
	LoadRegistration(ctx context.Context, issuer string) (*Registration, error)
	// SaveRegistration stores r under r.Issuer.
	SaveRegistration(ctx context.Context, r *Registration) error
}

// MemoryStore is an in-memory [Store], for tests and short-lived processes.
type MemoryStore struct {
	mu    sync.Mutex
	creds map[Key]*Credential
	regs  map[string]*Registration
}

// NewMemoryStore returns an empty in-memory store.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{creds: map[Key]*Credential{}, regs: map[string]*Registration{}}
}

// Load implements [Store].
func (m *MemoryStore) Load(_ context.Context, key Key) (*Credential, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.creds[key]
	if !ok {
		return nil, ErrNotFound
	}
	return c.clone(), nil
}

// Save implements [Store].
func (m *MemoryStore) Save(_ context.Context, c *Credential) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.creds[c.Key] = c.clone()
	return nil
}

// Delete implements [Store].
func (m *MemoryStore) Delete(_ context.Context, key Key) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.creds, key)
	return nil
}

// List implements [Store].
func (m *MemoryStore) List(_ context.Context, resource string) ([]*Credential, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*Credential
	for k, c := range m.creds {
		if resource == "" || k.Resource == resource {
			out = append(out, c.clone())
		}
	}
	sortNewestFirst(out)
	return out, nil
}

// LoadRegistration implements [Store].
func (m *MemoryStore) LoadRegistration(_ context.Context, issuer string) (*Registration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.regs[issuer]
	if !ok {
		return nil, ErrNotFound
	}
	d := *r
	d.RedirectURIs = slices.Clone(r.RedirectURIs)
	return &d, nil
}

// SaveRegistration implements [Store].
func (m *MemoryStore) SaveRegistration(_ context.Context, r *Registration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := *r
	d.RedirectURIs = slices.Clone(r.RedirectURIs)
	m.regs[r.Issuer] = &d
	return nil
}

func sortNewestFirst(cs []*Credential) {
	sort.SliceStable(cs, func(i, j int) bool {
		if !cs[i].Updated.Equal(cs[j].Updated) {
			return cs[i].Updated.After(cs[j].Updated)
		}
		if cs[i].Resource != cs[j].Resource {
			return cs[i].Resource < cs[j].Resource
		}
		return cs[i].Issuer < cs[j].Issuer
	})
}
