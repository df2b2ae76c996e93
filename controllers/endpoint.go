package controllers

import (
	"fmt"
	"strings"

	v1 "github.com/b10x/connector-mcp/api/v1"
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

// EndpointURLRefusal returns the refusal name of an endpoint URL carrying userinfo or a
// fragment, or "" when it carries neither. A query string is allowed (it is part of the
// reviewed endpoint, not a secret store). It is the CRDs' CEL rule: userinfo is an '@' in the
// authority (between "://" and the first '/', '?' or '#').
func EndpointURLRefusal(raw string) string {
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

// CheckEndpointURL refuses (Bound, EndpointRefused, not retried) an endpoint URL carrying
// userinfo or a fragment, naming field; the message never repeats the URL.
func CheckEndpointURL(field, raw string) *StageError {
	switch EndpointURLRefusal(raw) {
	case RefusalEndpointUserinfo:
		return &StageError{Condition: v1.ConditionBound, Reason: v1.ReasonEndpointRefused,
			Message: fmt.Sprintf("%s: %s must not carry userinfo (user:pass@); configuration names sources, never values: name a bearer with spec.mcpConnection.credentialRef", RefusalEndpointUserinfo, field)}
	case RefusalEndpointFragment:
		return &StageError{Condition: v1.ConditionBound, Reason: v1.ReasonEndpointRefused,
			Message: fmt.Sprintf("%s: %s must not carry a fragment (#...)", RefusalEndpointFragment, field)}
	}
	return nil
}
