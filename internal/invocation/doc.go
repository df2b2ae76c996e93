// Package invocation is what an in-cluster consumer (the operator, or a gateway embedding it)
// uses once a ServiceDeployment is Ready: describe an operation, lease it, authorize the caller
// and invoke the mapped remote tool, only through the reviewed, frozen surface.
//
// A [Surface] is built by [NewSurface] from the verified profile document (its operations and
// recorded snapshot) and the activated ServiceDeployment (its operations' expose flags, endpoint,
// credential reference and status.activeSnapshotDigest). Only exposed operations are part of it;
// anything else is refused as "not_exposed", so nothing new is ever exposed by accident. A
// surface is refused when the deployment's active snapshot digest is not the document's recorded
// one, its profile digest is not the document's, or the deployment is not Ready for its current
// generation.
//
// [Surface.Describe] returns the locally owned facts of an operation (reference, title,
// description, effect, and the input schema of the frozen descriptor) and a lease,
//
//	lease = hex(sha256(JCS({"connection", "effect", "operation", "profile", "remoteName", "seed",
//	                        "snapshot", "type": "b10x.connector-mcp-lease.v2"})))
//
// (see [Lease]) binding a later call to the frozen snapshot digest, the reviewed profile digest,
// the caller's stable authority seed, the operation with the remote tool name and effect the
// review gave it, and the Connection: a re-review that remaps or re-classifies an operation makes
// the leases issued before it stale, even over the same snapshot.
//
// [Surface.Invoke] refuses a wrong Connection, authorizes the caller with a Kubernetes
// SubjectAccessReview ([SubjectAccessReviewer]: verb "invoke" on "servicedeployments" in group
// "connectors.b10x.io", the deployment's name and namespace, so `kubectl auth can-i invoke
// servicedeployments/NAME` tells the truth), refuses an operation that is not exposed and a stale
// lease, bounds the arguments and validates them against the frozen input schema (compiled once
// per snapshot by a [SchemaCache] with santhosh-tekuri/jsonschema v6; no file or network
// reference is ever loaded; the schema is the descriptor's exact-case "inputSchema" member, read
// with snapshot.Unmarshal, never a case variant such as "InputSchema"), then calls the mapped remote tool name through an mcpclient session
// whose HTTP client is the egress port ([EgressConnector]). On connecting, the session's live
// tool list must still be the frozen snapshot ("live_drift" otherwise), and it is listed again
// before the first call once that check is Options.RelistInterval old (30 s by default), so a
// changed server is called for at most about that long; a session is reused for at most
// Options.MaxSessionAge. Arguments with member names equal under case folding are refused
// ("invalid_arguments", keyword KeywordAmbiguousKeys). The result JSON is kept
// as received; an "isError" result is a [*ToolError] carrying it; an oversize result is
// "result_too_large".
//
// [Surface.List] describes every exposed operation for one authorization (a gateway's answer to
// tools/list); a [Directory] routes requests to the surface of the Connection they name; and
// Options.Audit receives one [AuditEvent] per request (never arguments or results).
//
// Every refusal is a typed error with a stable snake_case name (Refusal method) matched with
// errors.Is against an ErrX sentinel. Errors never carry caller argument values, tokens, bodies or
// server prose; a validation failure names only the JSON Pointer of the argument and the schema
// keyword.
//
// See docs/invocation.md.
package invocation
