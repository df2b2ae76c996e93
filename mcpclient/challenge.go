package mcpclient

import "strings"

// insufficientScope reads the Bearer challenges of a 403 answer (RFC 6750 §3): ok is true when
// one says error="insufficient_scope"; scopes are its scope parameter's tokens, kept only when
// every one is a valid RFC 6749 scope-token within the bounds (the challenge is untrusted
// server text and may reach a status condition).
func insufficientScope(challenges []string) (scopes []string, ok bool) {
	for _, c := range challenges {
		scheme, rest, _ := strings.Cut(strings.TrimSpace(c), " ")
		if !strings.EqualFold(scheme, "Bearer") {
			continue
		}
		params := authParams(rest)
		if params["error"] != "insufficient_scope" {
			continue
		}
		return scopeTokens(params["scope"]), true
	}
	return nil, false
}

// authParams parses comma-separated auth-params (token=token / token=quoted-string). A malformed
// list yields what was read before the fault; a repeated name keeps its first value.
func authParams(s string) map[string]string {
	out := map[string]string{}
	for {
		s = strings.TrimLeft(s, " \t,")
		if s == "" {
			return out
		}
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			return out
		}
		name := strings.ToLower(strings.TrimSpace(s[:eq]))
		s = strings.TrimLeft(s[eq+1:], " \t")
		var val string
		if strings.HasPrefix(s, `"`) {
			var b strings.Builder
			i := 1
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				b.WriteByte(s[i])
			}
			if i >= len(s) {
				return out // unterminated quoted-string
			}
			val, s = b.String(), s[i+1:]
		} else {
			end := strings.IndexAny(s, ", \t")
			if end < 0 {
				end = len(s)
			}
			val, s = s[:end], s[end:]
		}
		if _, dup := out[name]; !dup {
			out[name] = val
		}
	}
}

// scopeTokens splits a scope value on spaces; nil unless every token is a scope-token
// (%x21 / %x23-5B / %x5D-7E) of at most maxChallengeScopeLen bytes, and there are at most
// maxChallengeScopes of them.
func scopeTokens(v string) []string {
	fields := strings.Fields(v)
	if len(fields) == 0 || len(fields) > maxChallengeScopes {
		return nil
	}
	for _, f := range fields {
		if len(f) > maxChallengeScopeLen {
			return nil
		}
		for i := 0; i < len(f); i++ {
			c := f[i]
			if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
				return nil
			}
		}
	}
	return fields
}
