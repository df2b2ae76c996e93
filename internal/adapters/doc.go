// Package adapters implements the activation package's ports to the outside world over the
// project's packages: Freezer over mcpclient and egress (every byte to the MCP server goes through
// the egress port, with the bearer fetched from the deployment's own namespace per exchange), and
// PackVerifier over ocipack and internal/ociregistry (pull by digest, sigstore and provenance
// verification), which the manager and the gateway both build (internal/appoptions), so a profile
// verifies in both or in neither. They are plain transport: they return the wrapped packages' own
// errors (or a StepError naming a step of their own), and the activation table classifies them
// into conditions; policy decisions stay in the activation and controllers packages and in the
// packages they wrap.
package adapters
