package oauth

import (
	"context"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// CanonicalResource returns the canonical form of an MCP server URL, the resource half of a
// credential [Key]: scheme and host lower-cased, default port and fragment removed. URLs with
// user information or a scheme other than http or https are rejected.
func CanonicalResource(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" || u.Opaque != "" {
		return "", ErrInvalidServerURL
	}
	u.Scheme = strings.ToLower(u.Scheme)
	if (u.Scheme != "https" && u.Scheme != "http") || u.User != nil {
		return "", ErrInvalidServerURL
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if (u.Scheme == "https" && port == "443") || (u.Scheme == "http" && port == "80") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	u.Host = host
	u.Fragment, u.RawFragment = "", ""
	return u.String(), nil
}

// discovered is the outcome of metadata discovery for one challenge.
type discovered struct {
	// audience is the protected resource's identifier (RFC 9728 "resource").
	audience string
	// issuer is the authorization server's issuer identifier.
	issuer string
	asm    *oauthex.AuthServerMeta
}

// discover finds the authorization server for serverURL exactly as the SDK's
// AuthorizationCodeHandler does (RFC 9728 metadata from the challenge, then the path-inserted and
// root well-known URLs, then the 2025-03-26 fallbacks), using the SDK's exported fetchers. The
// handler needs the issuer before the SDK runs, to pick the credential key and the persisted
// client registration; the SDK's own discovery is then checked against this one (see
// [Handler.newTokenSource]).
func (h *Handler) discover(ctx context.Context, challenges []oauthex.Challenge, serverURL string) (*discovered, error) {
	prm, err := h.protectedResourceMetadata(ctx, challenges, serverURL)
	if err != nil {
		return nil, err
	}
	asm, err := auth.GetAuthServerMetadata(ctx, prm.AuthorizationServers[0], h.client)
	if err != nil {
		return nil, &AuthorizationError{Stage: "discovery", err: h.dialRefusal()}
	}
	if asm == nil {
		as := prm.AuthorizationServers[0]
		asm = &oauthex.AuthServerMeta{
			Issuer:                as,
			AuthorizationEndpoint: as + "/authorize",
			TokenEndpoint:         as + "/token",
			RegistrationEndpoint:  as + "/register",
		}
	}
	return &discovered{audience: prm.Resource, issuer: asm.Issuer, asm: asm}, nil
}

func (h *Handler) protectedResourceMetadata(ctx context.Context, challenges []oauthex.Challenge, serverURL string) (*oauthex.ProtectedResourceMetadata, error) {
	type candidate struct{ url, resource string }
	var cands []candidate
	for _, c := range challenges {
		if u := c.Params["resource_metadata"]; u != "" {
			cands = append(cands, candidate{u, serverURL})
			break
		}
	}
	ru, err := url.Parse(serverURL)
	if err != nil {
		return nil, &BindingError{What: "resource"}
	}
	mu := *ru
	mu.Path = "/.well-known/oauth-protected-resource/" + strings.TrimLeft(ru.Path, "/")
	cands = append(cands, candidate{mu.String(), serverURL})
	mu.Path = "/.well-known/oauth-protected-resource"
	root := *ru
	root.Path = ""
	cands = append(cands, candidate{mu.String(), root.String()})
	for _, c := range cands {
		prm, err := oauthex.GetProtectedResourceMetadata(ctx, c.url, c.resource, h.client)
		if err != nil || prm == nil {
			continue
		}
		if len(prm.AuthorizationServers) == 0 {
			return nil, &AuthorizationError{Stage: "discovery"}
		}
		return prm, nil
	}
	if ctx.Err() != nil {
		return nil, &AuthorizationError{Stage: "discovery", err: ctx.Err()}
	}
	// 2025-03-26 fallback: the MCP server's origin is the authorization server.
	return &oauthex.ProtectedResourceMetadata{AuthorizationServers: []string{root.String()}, Resource: serverURL}, nil
}

// challengeScopes returns the scopes of the Bearer challenge.
func challengeScopes(cs []oauthex.Challenge) []string {
	for _, c := range cs {
		if c.Scheme == "bearer" && c.Params["scope"] != "" {
			return strings.Fields(c.Params["scope"])
		}
	}
	return nil
}

// safeScopes keeps the scope tokens that may be repeated in a message: at most 16, each at most
// 64 characters of [A-Za-z0-9:._/-]. Anything else a server sends is dropped.
func safeScopes(in []string) []string {
	var out []string
	for _, s := range in {
		if len(out) == 16 || len(s) == 0 || len(s) > 64 {
			continue
		}
		if strings.IndexFunc(s, func(r rune) bool { return !scopeRune(r) }) < 0 {
			out = append(out, s)
		}
	}
	return out
}

func scopeRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(":._/-", r)
}

// challengeError returns the Bearer challenge's error code ("insufficient_scope", ...).
func challengeError(cs []oauthex.Challenge) string {
	for _, c := range cs {
		if c.Scheme == "bearer" && c.Params["error"] != "" {
			return c.Params["error"]
		}
	}
	return ""
}
