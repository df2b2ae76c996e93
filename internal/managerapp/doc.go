// Package managerapp wires the connector-mcp manager: its flags and validation (the trust, egress
// and TLS policy it shares with the gateway comes from internal/appoptions), its cache, the real
// adapters (mcpclient and egress for live freezes, the pack verifier for profiles), metrics and
// the reconcilers. cmd/manager runs it; the envtest user stories run the same wiring against a
// test control plane.
package managerapp
