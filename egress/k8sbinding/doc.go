// Package k8sbinding is the Kubernetes side of an egress endpoint binding: the one place that
// decides whether a Secret may be spent as a bearer credential for an endpoint, which private
// ranges a namespace may open (the McpTrustPolicy egress ceiling), and which cluster addresses
// are always denied (the apiserver's Service and EndpointSlice addresses, the Service CIDRs).
//
// Every spender of credentials and every dialer of tenant endpoints — the manager's live
// freeze, its credential fingerprint and the invocation connector — builds its egress port
// through [Binder.Transport], so the rules cannot differ between them. The egress package
// itself stays free of Kubernetes: it only sees an [egress.SecretStore] and an
// [egress.IPPolicy].
package k8sbinding
