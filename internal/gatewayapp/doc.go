// Package gatewayapp wires the connector-mcp gateway: its flags and validation (the trust, egress
// and TLS policy it shares with the manager comes from internal/appoptions), the informer-fed
// registry of active surfaces (profiles verified by the resolver the manager builds too), TokenReview
// authentication, cached SubjectAccessReview authorization, the egress connector and the HTTP
// server. cmd/gateway runs it; the envtest user stories run the same wiring.
package gatewayapp
