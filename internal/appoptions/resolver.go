package appoptions

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/activation"
	"github.com/b10x/connector-mcp/internal/adapters"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
	"github.com/b10x/connector-mcp/internal/ociregistry"
)

// ResolverInputs is what a binary gives NewResolver beside its options: the clients of its
// cluster and its metrics.
type ResolverInputs struct {
	// IP and Deny are the process's dial-time policy and cluster deny list (Egress.IPPolicy,
	// Egress.ClusterDeny); the registry client dials under both.
	IP   egress.IPPolicy
	Deny k8sbinding.DenySource
	// Secrets reads pull and public-key Secrets by name: the manager's cached client (whose
	// Secret informer sees only opted-in Secrets), or the gateway's uncached API reader.
	Secrets client.Reader
	// Trust lists McpTrustPolicies and reads Namespaces.
	Trust client.Reader
	// Store, when not nil, is the verified-pack store of the anonymous registry client.
	Store ociregistry.BlobStore
	// CacheHits and CacheMisses count the resolver's memo answers (nil: not counted).
	CacheHits, CacheMisses prometheus.Counter
}

// NewResolver builds the profile resolver: the pack verifier over the egress-guarded registry
// client, under the cluster trust policy of s. The manager and the gateway both build theirs
// here, so a profile verifies in both or in neither. s must have been validated: the CA bundle is
// the one Validate read.
func (s *Shared) NewResolver(in ResolverInputs) (*activation.Resolver, error) {
	verifier, err := s.packVerifier(in)
	if err != nil {
		return nil, err
	}
	return &activation.Resolver{Verifier: verifier, RequireProvenance: !s.SkipProvenanceUnsafe,
		CacheHits: in.CacheHits, CacheMisses: in.CacheMisses}, nil
}

// packVerifier builds the OCI pack verifier over an egress-guarded registry client.
func (s *Shared) packVerifier(in ResolverInputs) (*adapters.PackVerifier, error) {
	tlsCfg, err := s.TLSClientConfig()
	if err != nil {
		return nil, err
	}
	hc, err := RegistryHTTPClient(in.IP, in.Deny, tlsCfg, s.ExchangeTimeout)
	if err != nil {
		return nil, err
	}
	// Dials nothing: a TUF repository is fetched at the first keyless verification.
	trusted, tufRoot, err := s.trustedRoot(hc)
	if err != nil {
		return nil, err
	}
	reg := ociregistry.Client{HTTPClient: hc, PlainHTTP: s.AllowLoopbackUnsafe}
	if in.Store != nil {
		// Anonymous pulls read and write the store; a client given a pull secret's
		// credentials does not use it (ociregistry.Client.Store).
		reg.Store = in.Store
	}
	opts := []ociregistry.VerifierOption{ociregistry.WithStrictKeyless()}
	if !s.KeylessWithoutTlogUnsafe {
		opts = append(opts, ociregistry.WithKeylessTransparencyLog(1))
	}
	if s.KeylessRequireSignedTimestamp {
		opts = append(opts, ociregistry.WithKeylessSignedTimestamps(1))
	}
	if tufRoot != nil {
		// One source for every verifier (pull-secret ones too): one fetch, one kept root.
		opts = append(opts, ociregistry.WithTrustedRootSource(tufRoot))
	}
	waived, _ := s.WaivedChecks()
	v := &adapters.PackVerifier{
		Registry:             reg,
		Secrets:              in.Secrets,
		Trust:                in.Trust,
		SkipProvenanceUnsafe: s.SkipProvenanceUnsafe,
		Waived:               waived,
		NewVerifier: func(c *ociregistry.Client) *ociregistry.Verifier {
			return ociregistry.NewVerifier(c, trusted, append(opts, ociregistry.WithCacheSize(0))...)
		},
	}
	shared := reg
	v.Verifier = ociregistry.NewVerifier(&shared, trusted, opts...)
	platform, err := s.platformSource()
	if err != nil {
		return nil, err
	}
	v.Platform = platform
	return v, nil
}
