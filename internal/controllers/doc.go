// Package controllers holds the connector-mcp reconcilers and the pure decisions they run.
//
// The McpServiceProfile reconciler verifies a profile's source (an OCI pack pinned by digest and
// checked against the trust sources of its namespace, or an inline document where the cluster
// policy allows it) and reconstructs the recorded snapshot digest from the recorded descriptors.
//
// The ServiceDeployment reconciler runs the activation pipeline as ordered stages, each a
// condition: ProfileVerified (the referenced profile is verified and current), Bound (binding
// checks, grants as Kubernetes RBAC, and the bundle builder's collision rules across
// deployments), SnapshotFrozen (live freeze through egress) and SnapshotMatched (typed equality
// of the live and the reviewed snapshot). Binding runs before the live freeze so an unbound
// deployment never dials its endpoint nor reads its credential. Only when every stage passes is
// the deployment Ready with the frozen snapshot digest as its active authority surface.
//
// The stages, their conditions and every outcome they can end in are one table, in package
// internal/activation, with the Resolver that runs the profile stages and the rulesets that
// classify a library's error (ocipack, egress, internal/k8sbinding, mcpclient) into a stage
// outcome by sentinel, type or refusal name; the gateway shares it. docs/concepts.md shows the
// same table.
//
// Conditions are kstatus-compatible (Ready, Reconciling, Stalled; their types and reasons are
// in api/v1). A transient failure (server unreachable, registry unreachable, missing Secret)
// leaves Ready False and Reconciling True and is retried; a refusal that needs a human (drift,
// failed verification, a binding error) sets Stalled True. observedGeneration is written only
// when a generation reaches a decision (Ready or Stalled), so kstatus reads Current or Failed
// for it. Condition reasons equal event reasons; messages never carry secrets, URL userinfo or
// query, or server prose.
//
// Decisions are pure functions (binding.go, grants.go, collision.go, drift.go, endpoint.go),
// tested without a cluster. The outside world is reached only through the activation package's
// SourceVerifier and Freezer interfaces, implemented over ocipack, mcpclient and egress by
// package internal/adapters and wired in internal/managerapp and internal/gatewayapp.
package controllers
