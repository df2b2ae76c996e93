// Package k8sbinding is the Kubernetes side of an egress endpoint binding: the one place that
// decides whether a Secret may be spent as a bearer credential for an endpoint, which private
// ranges a namespace may open (the McpTrustPolicy egress ceiling), and which cluster addresses
// are always denied (the apiserver's Service and EndpointSlice addresses, the Service CIDRs, the
// gateway's own Service: [APIServerDeny]).
//
// Every spender of credentials and every dialer of tenant endpoints — the manager's live
// freeze, its credential fingerprint and the invocation connector — builds its egress port
// through [Binder.Transport], so the rules cannot differ between them. Every other outbound
// client of the manager and the gateway (OCI registry, OAuth producer, drift webhook) is built by
// [NewClient]; both judge the deny list at every dial (egress.Policy.Deny). The egress package
// itself stays free of Kubernetes: it only sees an [egress.SecretStore], an [egress.IPPolicy]
// and an [egress.DenySource].
package k8sbinding
