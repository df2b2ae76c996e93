// Package importrules holds the architecture of this module as tests; it has no non-test code
// besides this comment. Run it with `go test ./internal/importrules/`.
//
//   - rules_test.go: the layering rules over `go list -deps -json ./...` — no Kubernetes in the
//     foundation (api, snapshot, mcpclient, egress, refusal, ocipack, internal/wire), the
//     foundation never depends on operator code, mcpclient is handed its port (never imports
//     egress), refusal is a leaf, the pack format, activation and the request path (invocation,
//     gateway) carry no sigstore or registry client, nothing but the manager's composition root
//     imports the reconcilers, the gateway links nothing of the manager, review and invocation
//     know no activation, composition roots are imported only by cmd/ and the binaries link no
//     test doubles.
//   - treemap_test.go: docs/development.md's map of the tree names every package and exactly
//     what each folder imports.
//   - surface_test.go: every exported name of a public package is used outside it, is a
//     sentinel, or is kept with its reason.
//   - refusals_test.go: refusal names are exported constants, never literals where a refusal is
//     built.
package importrules
