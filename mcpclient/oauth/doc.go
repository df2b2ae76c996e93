// Package oauth connects MCP clients to OAuth-protected MCP servers through go-sdk's
// [auth.AuthorizationCodeHandler], with credential custody bound to both the protected resource
// and the authorization server that issued each token.
//
// The protocol is the SDK's: protected-resource metadata (RFC 9728, from the 401 challenge or
// the well-known URLs), authorization-server or OpenID discovery with issuer checks (RFC 8414),
// the authorization code grant with PKCE S256, resource indicators (RFC 8707), the RFC 9207
// "iss" check, and step-up on 403 insufficient_scope. This package adds what the SDK leaves to
// its caller:
//
//   - Custody. A [Store] keeps each [Credential] under a [Key] of (resource, issuer) and keeps
//     dynamic client registrations per issuer, so registration is not repeated. [XDGStore] is
//     the CLI's (0700 directories, 0600 files, atomic replace, unsafe files refused);
//     [MemoryStore] is for tests; hosted consumers implement Store over their secret store.
//   - Binding. A [Handler] serves one MCP server. It presents stored credentials only to that
//     server, refreshes them only at the issuer they were obtained from (persisting every new
//     token), and when the server challenges it discovers the issuer the server names now: a
//     credential stored under another issuer is never reused, a new authorization is started.
//     After the code exchange it checks that the SDK talked to that same issuer.
//   - Registration preference: a pre-registered client id, then a Client ID Metadata Document
//     URL (when the authorization server supports it), then dynamic registration.
//   - Scopes: earlier grants are kept across step-up authorizations.
//   - invalid_grant on refresh leads to a new authorization (or, for a handler without an
//     interactive fetcher, the "login_required" refusal); a failed refresh never changes the
//     stored credential.
//   - SSRF: the package owns no socket. Metadata, registration, token and refresh requests go
//     through the [*http.Client] the caller hands over (Options.HTTPClient): mcpctl and the
//     manager build it from the egress port, whose dial-time IP policy refuses private,
//     link-local, metadata and (outside development) loopback addresses.
//   - Hygiene: errors carry stages and registered OAuth error codes, never tokens,
//     authorization codes, client secrets or the server's prose.
//
// For the CLI, [ListenLoopback] receives the authorization response on 127.0.0.1 with a random
// port (RFC 8252), and [Handler.Login] runs a fresh authorization.
package oauth
