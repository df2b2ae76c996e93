// Package appoptions holds the options the manager and the gateway share, so that both verify
// packs and dial endpoints alike: pack verification (Verification), the egress policy (Egress)
// and outbound TLS (TLS), grouped as Shared. Each carries its flags, its Validate and its
// defaults, and the constructors both binaries build from it: the profile resolver
// (Shared.NewResolver), the dial-time IP policy (Egress.IPPolicy), the cluster deny list
// (Egress.ClusterDeny) and the CA bundle read once (TLS.TLSClientConfig); CacheByObject is the
// informer configuration of the kinds both caches hold. internal/managerapp and
// internal/gatewayapp embed Shared in their Options.
package appoptions
