package oauth

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/b10x/connector-mcp/snapshot"
)

// Binding is what a hosted producer learns, without any user interaction, about the (resource,
// issuer) pair a credential is bound to: the protected resource's RFC 9728 metadata names the
// issuer, and the issuer's RFC 8414 metadata names the token endpoint. See [DiscoverBinding].
type Binding struct {
	// Key is the (canonical resource, issuer) pair.
	Key
	// Audience is the resource identifier of the protected-resource metadata (the RFC 8707
	// resource indicator).
	Audience string
	// TokenEndpoint is the issuer's token endpoint; it shares the issuer's origin.
	TokenEndpoint string
	// GrantTypes are the grant types the issuer advertises (empty when it advertises none).
	GrantTypes []string
}

// DiscoverBinding checks, through client, that the protected resource at resourceURL names
// issuer as one of its authorization servers and that issuer's metadata is its own, and returns
// the token endpoint to use. It is the hosted producer's check before every token request:
//   - the protected-resource metadata (path-inserted, then root well-known URL) must describe
//     resourceURL itself, else a [*BindingError] "resource";
//   - its authorization_servers must list issuer, and the issuer's metadata must carry the same
//     issuer identifier, else a [*BindingError] "issuer";
//   - the token endpoint must be on the issuer's origin (scheme, host and port), else a
//     [*BindingError] "token_endpoint": a refresh token is never sent to another party.
//
// Transport failures are [*AuthorizationError] at stage "discovery".
func DiscoverBinding(ctx context.Context, client *http.Client, resourceURL, issuer string) (*Binding, error) {
	if client == nil {
		return nil, ErrHTTPClientRequired
	}
	res, err := CanonicalResource(resourceURL)
	if err != nil {
		return nil, err
	}
	rec := &refusalRecorder{}
	client = rec.wrap(client)
	prm, err := fetchResourceMetadata(ctx, client, res)
	if err != nil {
		return nil, &AuthorizationError{Stage: "discovery", err: recorded(rec)}
	}
	if got, err := CanonicalResource(prm.Resource); err != nil || got != res {
		return nil, &BindingError{What: "resource"}
	}
	if !slices.Contains(prm.AuthorizationServers, issuer) {
		return nil, &BindingError{What: "issuer"}
	}
	asm, err := auth.GetAuthServerMetadata(ctx, issuer, client)
	switch {
	case err != nil && strings.Contains(err.Error(), "issuer"):
		return nil, &BindingError{What: "issuer"}
	case err != nil || asm == nil:
		return nil, &AuthorizationError{Stage: "discovery", err: recorded(rec)}
	case asm.Issuer != issuer:
		return nil, &BindingError{What: "issuer"}
	}
	if !sameOrigin(asm.TokenEndpoint, issuer) {
		return nil, &BindingError{What: "token_endpoint"}
	}
	return &Binding{Key: Key{Resource: res, Issuer: issuer}, Audience: prm.Resource,
		TokenEndpoint: asm.TokenEndpoint, GrantTypes: slices.Clone(asm.GrantTypesSupported)}, nil
}

func recorded(r *refusalRecorder) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// resourceMetadata is the part of RFC 9728 metadata the producer reads.
type resourceMetadata struct {
	Resource             string   `json:"resource"`
	AuthorizationServers []string `json:"authorization_servers"`
}

// fetchResourceMetadata reads the protected-resource metadata of res at the path-inserted, then
// the root well-known URL (bounded; the first 200 answer counts).
func fetchResourceMetadata(ctx context.Context, client *http.Client, res string) (*resourceMetadata, error) {
	u, err := url.Parse(res)
	if err != nil {
		return nil, err
	}
	paths := []string{"/.well-known/oauth-protected-resource/" + strings.TrimLeft(u.Path, "/")}
	if strings.Trim(u.Path, "/") != "" {
		paths = append(paths, "/.well-known/oauth-protected-resource")
	}
	last := errors.New("no protected-resource metadata")
	for _, p := range paths {
		mu := *u
		mu.Path, mu.RawQuery = p, ""
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, mu.String(), nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			last = err
			continue
		}
		body, rerr := io.ReadAll(io.LimitReader(resp.Body, maxOAuthResponse))
		resp.Body.Close()
		if rerr != nil || resp.StatusCode != http.StatusOK {
			continue
		}
		var prm resourceMetadata
		if err := snapshot.Unmarshal(body, &prm); err != nil {
			return nil, err
		}
		return &prm, nil
	}
	return nil, last
}

// sameOrigin reports whether a and b are absolute URLs with the same scheme, host and port.
func sameOrigin(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	if err1 != nil || err2 != nil || ua.Host == "" {
		return false
	}
	return strings.EqualFold(ua.Scheme, ub.Scheme) && strings.EqualFold(ua.Host, ub.Host)
}

// ProducerClient is the client registration a hosted producer presents at the token endpoint.
type ProducerClient struct {
	// ID is the client identifier (pre-registered, a Client ID Metadata Document URL, or a
	// dynamically registered id).
	ID string
	// Secret is the client secret of a confidential client, or "".
	Secret string
}

// Refresh redeems refreshToken at b's token endpoint through client (a hosted producer's
// refresh) and returns the new credential under b's key. A rotated refresh token is returned in
// the credential (the caller must persist it before the old one is dropped); when the issuer
// does not rotate, the credential carries refreshToken again. invalid_grant is a
// [*RefreshError] with Code "invalid_grant" (see [IsInvalidGrant]): a new authorization is
// needed. Errors carry registered OAuth error codes only, never a token or the server's prose.
func Refresh(ctx context.Context, client *http.Client, b *Binding, c ProducerClient, refreshToken string, scopes []string) (*Credential, error) {
	if client == nil {
		return nil, ErrHTTPClientRequired
	}
	cfg := &oauth2.Config{ClientID: c.ID, ClientSecret: c.Secret, Endpoint: oauth2.Endpoint{TokenURL: b.TokenEndpoint}, Scopes: scopes}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, client)
	t, err := cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: refreshToken, Expiry: time.Unix(1, 0)}).Token()
	if err != nil {
		return nil, refreshFailure(err)
	}
	return producedCredential(b, c, t, scopes, refreshToken), nil
}

// ClientCredentials obtains a token with the client-credentials grant (RFC 6749 §4.4) at b's
// token endpoint through client, with b's audience as the RFC 8707 resource indicator. The
// client must be confidential (Secret set). Errors are as for [Refresh].
func ClientCredentials(ctx context.Context, client *http.Client, b *Binding, c ProducerClient, scopes []string) (*Credential, error) {
	if client == nil {
		return nil, ErrHTTPClientRequired
	}
	if c.Secret == "" {
		return nil, &RefreshError{Code: "invalid_client"}
	}
	cfg := &clientcredentials.Config{ClientID: c.ID, ClientSecret: c.Secret, TokenURL: b.TokenEndpoint, Scopes: scopes,
		EndpointParams: url.Values{"resource": {b.Audience}}}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, client)
	t, err := cfg.Token(ctx)
	if err != nil {
		return nil, refreshFailure(err)
	}
	return producedCredential(b, c, t, scopes, ""), nil
}

// IsInvalidGrant reports whether err is a refresh the issuer answered with invalid_grant: the
// grant is revoked or expired and a human must authorize again.
func IsInvalidGrant(err error) bool {
	var re *RefreshError
	return errors.As(err, &re) && re.Code == "invalid_grant"
}

func refreshFailure(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		return &RefreshError{Code: sanitizeCode(re.ErrorCode)}
	}
	return &RefreshError{}
}

func producedCredential(b *Binding, c ProducerClient, t *oauth2.Token, requested []string, oldRefresh string) *Credential {
	scopes := slices.Clone(requested)
	if s, ok := t.Extra("scope").(string); ok && s != "" {
		scopes = strings.Fields(s)
	}
	cred := &Credential{
		Key: b.Key, Audience: b.Audience, TokenURL: b.TokenEndpoint, ClientID: c.ID, ClientSecret: c.Secret,
		Scopes: scopes, AccessToken: t.AccessToken, TokenType: t.TokenType, RefreshToken: t.RefreshToken,
		Expiry: t.Expiry, Updated: time.Now().UTC(),
	}
	if cred.RefreshToken == "" {
		cred.RefreshToken = oldRefresh
	}
	return cred
}

// MissingScopes returns the scopes of want that granted lacks (plain scope tokens only, as
// [safeScopes] keeps them): what a human must authorize again to obtain.
func MissingScopes(want, granted []string) []string {
	var out []string
	for _, s := range want {
		if !slices.Contains(granted, s) {
			out = append(out, s)
		}
	}
	return safeScopes(out)
}
