package controllers

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/b10x/connector-mcp/internal/activation"
)

// Stable refusal names of an endpoint URL that carries a value: configuration names sources
// (a credentialRef, a caBundleRef), never values. The CRDs refuse both at admission (CEL); the
// controller refuses them again for objects written before the rule existed.
const (
	// RefusalEndpointUserinfo: the URL carries userinfo (user:pass@).
	RefusalEndpointUserinfo = "endpoint_userinfo"
	// RefusalEndpointFragment: the URL carries a fragment (#...).
	RefusalEndpointFragment = "endpoint_fragment"
)

// endpointURLRefusal returns the refusal name of an endpoint URL carrying userinfo or a
// fragment, or "" when it carries neither. A query string is allowed (it is part of the
// reviewed endpoint, not a secret store). It is the CRDs' CEL rule: userinfo is an '@' in the
// authority (between "://" and the first '/', '?' or '#').
func endpointURLRefusal(raw string) string {
	if _, rest, ok := strings.Cut(raw, "://"); ok {
		auth := rest
		if i := strings.IndexAny(auth, "/?#"); i >= 0 {
			auth = auth[:i]
		}
		if strings.Contains(auth, "@") {
			return RefusalEndpointUserinfo
		}
	}
	if strings.Contains(raw, "#") {
		return RefusalEndpointFragment
	}
	return ""
}

// checkEndpointURL refuses (Bound, EndpointRefused, not retried) an endpoint URL carrying
// userinfo or a fragment, naming field; the message never repeats the URL.
func checkEndpointURL(field, raw string) *activation.StageError {
	switch endpointURLRefusal(raw) {
	case RefusalEndpointUserinfo:
		return activation.EndpointRefused.New("%s: %s must not carry userinfo (user:pass@); configuration names sources, never values: name a bearer with spec.mcpConnection.credentialRef", RefusalEndpointUserinfo, field)
	case RefusalEndpointFragment:
		return activation.EndpointRefused.New("%s: %s must not carry a fragment (#...)", RefusalEndpointFragment, field)
	}
	return nil
}

// normalizeEndpoint returns the endpoint identity of an MCP URL: lowercase scheme and host
// without a trailing dot, explicit decimal port, and the path with percent-escapes normalised
// (escaped unreserved characters decoded, other escapes in upper case), without userinfo, query
// or fragment. Two URLs naming the same endpoint normalize equally, so "https://h./%6Dcp" and
// "https://H:443/mcp" collide.
func normalizeEndpoint(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", errors.New("the endpoint URL does not parse")
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "https" && scheme != "http" {
		return "", errors.New("the endpoint URL must be http or https")
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "" || strings.HasSuffix(host, ".") {
		return "", errors.New("the endpoint URL has no host")
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[scheme]
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return "", errors.New("the endpoint URL has an invalid port")
	}
	path, err := normalizePath(u.EscapedPath())
	if err != nil {
		return "", errors.New("the endpoint URL has an invalid path escape")
	}
	if path == "" {
		path = "/"
	}
	return scheme + "://" + net.JoinHostPort(host, strconv.FormatUint(n, 10)) + path, nil
}

// normalizePath rewrites an escaped path per RFC 3986 section 6.2.2: escapes of unreserved
// characters are decoded, every other escape is written in upper case.
func normalizePath(p string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(p) {
			return "", errors.New("truncated escape")
		}
		v, err := strconv.ParseUint(p[i+1:i+3], 16, 8)
		if err != nil {
			return "", err
		}
		if d := byte(v); isUnreserved(d) {
			b.WriteByte(d)
		} else {
			fmt.Fprintf(&b, "%%%02X", d)
		}
		i += 2
	}
	return b.String(), nil
}

func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}
