// Package gateway is the inbound MCP route of connector-mcp: it serves the reviewed operations of
// activated ServiceDeployments to workloads that speak plain MCP (Streamable HTTP, protocol eras
// 2026-07-28 and 2025-11-25, go-sdk server in stateless mode).
//
// A [Registry] keeps one [invocation.Surface] per ServiceDeployment that is Ready for its current
// generation, built from the profile document the gateway itself verifies with the manager's
// policy (activation.Resolver built by appoptions.Shared.NewResolver). A deployment that stops being Ready is
// removed from the registry on the informer event that says so.
//
// [Gateway] serves two routes:
//
//   - /mcp/{namespace}/{servicedeployment}: tools/list lists the exposed operations of the
//     deployment when the caller may invoke it (name = operation reference, reviewed title and
//     description, the frozen inputSchema, annotations derived only from the reviewed effect);
//     tools/call describes and invokes under a lease computed for that caller and answers with
//     the upstream result JSON.
//   - /mcp: the meta-tools search_operations, describe_operation and invoke_operation over every
//     deployment the caller may invoke.
//
// Every request is authenticated with a Kubernetes TokenReview for the configured audience
// ([TokenAuthenticator], cached by token hash for at most the token's remaining life and a
// ceiling) and authorized with the SubjectAccessReview "invoke servicedeployments/NAME"
// ([CachingAuthorizer], cached for at most a TTL). Live drift seen at call time is refused
// ("live_drift") and the gateway asks the manager to re-verify at once by creating an
// api/v1.McpReverifyRequest naming the deployment ([Reverifier]).
//
// Refusals are JSON-RPC errors whose message is "refused: <name>" and whose data is
// {"refusal": "<name>"} (plus "pointer" and "keyword" for invalid_arguments); transport-level
// refusals (unauthenticated, caller_busy, overloaded, host_not_allowed, shutting_down) are HTTP
// statuses with the same JSON-RPC error body. Nothing a refusal, log line or event carries holds
// a token, argument value, result or server prose.
//
// See docs/gateway.md.
package gateway
