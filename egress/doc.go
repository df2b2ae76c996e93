// Package egress is the only way out of connector-mcp: a bounded, SSRF-safe exchange port for
// every outbound HTTP request of the operator (MCP servers, OCI registries, OAuth discovery).
//
// The port is built from a [Policy] derived from a reviewed endpoint binding:
//
//   - the scheme is HTTPS; plain HTTP is accepted only towards loopback and only when the
//     [IPPolicy] explicitly allows loopback (development);
//   - the destination must match the bound host and port exactly; redirects are off by default
//     and, when allowed, capped, re-checked per hop, never downgraded from https to http and
//     never carry Authorization to another host;
//   - the IP policy is judged at dial time, in [net.Dialer] Control, on the address the socket is
//     about to connect to, so DNS rebinding, redirects and odd literal encodings (decimal, octal,
//     hex, short forms, IPv4-mapped IPv6, NAT64, 6to4) are all judged on the real peer. Loopback
//     (unless allowed for development), unspecified, link-local, multicast, reserved, cloud
//     metadata and the cluster's own apiserver are always refused; private ranges (RFC 1918,
//     CGNAT, ULA, documentation) only through an explicit CIDR allow-list;
//   - the proxy environment (HTTP_PROXY, ...) is ignored;
//   - request bytes, response bytes (after decompression), header bytes and the per-exchange
//     deadline are bounded, and every bound is a named refusal.
//
// [Transport] is the exchange port: one request in ([Transport.Exchange]), one fully read,
// bounded [Response] out. [Transport.HTTPClient] adapts it to an [http.Client] that go-sdk's
// mcp.StreamableClientTransport can be handed: JSON and bounded SSE POST responses go through
// the port, the standalone server-push GET stream is declined with 405 (which go-sdk treats as
// "the server offers no stream"), and the session DELETE goes through the port too. The MCP
// code owns no socket.
//
// An optional bearer is addressed by a [CredentialRef] and fetched from a [SecretStore] for each
// exchange (the Kubernetes store, internal/k8sbinding, reads one key of one opted-in Secret in the
// consumer's own namespace); it is set on the outgoing request only, then dropped. It never appears in logs or
// errors.
//
// Refusals are typed errors ([DestinationError], [SchemeError], [TooLargeError],
// [RedirectError], [DeadlineError]) matched with errors.Is against the ErrX sentinels; each
// has a Refusal method returning its stable snake_case name. They carry no response body, no
// header value and no server prose.
//
// The guarded dialer ([NewDialer], [IPPolicy.Control]) and the streaming client
// ([NewHTTPClient]) are exported for the OCI registry client and OAuth discovery. A dynamic deny
// list ([Policy.Deny], a [DenySource]) is read at every dial; the manager and the gateway build
// every client through internal/k8sbinding (NewClient, Binder), which requires the cluster's.
package egress
