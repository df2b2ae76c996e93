// Package controllers holds the connector-mcp reconcilers and the pure decisions they run.
//
// The McpServiceProfile reconciler verifies a profile's source (an OCI pack pinned by digest and
// checked against a provenance policy, or an inline document where the cluster policy allows it)
// and reconstructs the recorded snapshot digest from the recorded descriptors.
//
// The ServiceDeployment reconciler runs the activation pipeline of DESIGN.md §6 as ordered
// stages, each a condition: ProfileVerified (the referenced profile is verified and current),
// Bound (binding checks, grants as Kubernetes RBAC, and the bundle builder's collision rules
// across deployments), SnapshotFrozen (live freeze through egress) and SnapshotMatched
// (typed equality of the live and the reviewed snapshot). Binding runs before the live freeze so
// an unbound deployment never dials its endpoint nor reads its credential. Only when every stage
// passes is the deployment Ready with the frozen snapshot digest as its active authority surface.
//
// Conditions are kstatus-compatible (Ready, Reconciling, Stalled). A transient failure (server
// unreachable, registry unreachable, missing Secret) leaves Ready False and Reconciling True and
// is retried; a refusal that needs a human (drift, failed verification, a binding error) sets
// Stalled True. observedGeneration is written only when a generation reaches a decision
// (Ready or Stalled), so kstatus reads Current or Failed for it. Condition reasons equal event
// reasons; messages never carry secrets, URL userinfo or query, or server prose.
//
// Every decision is a pure function in policy.go, tested without a cluster. The outside world is
// reached only through the SourceVerifier and Freezer interfaces, implemented over ocipack,
// mcpclient and egress by the live package and wired in cmd/manager.
package controllers
