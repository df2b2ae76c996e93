// Package importrules holds the layering rules of this module as a test (rules_test.go): it runs
// `go list -deps -json ./...` and fails when a package depends on what its layer must not know.
//
//   - api/, snapshot/, mcpclient/... and egress/ (core; not internal/k8sbinding, the Kubernetes
//     binding) must not depend on client-go or controller-runtime;
//   - mcpclient/... must not depend on egress/: the MCP foundation is handed its port (an
//     *http.Client or an egress-built transport), it never builds one;
//   - refusal/ is a leaf: it imports nothing of this module.
//
// Run it with `go test ./internal/importrules/`. The package has no non-test code besides this
// comment.
package importrules
