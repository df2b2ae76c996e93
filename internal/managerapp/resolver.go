package managerapp

import (
	"fmt"
	"github.com/b10x/connector-mcp/internal/activation"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/adapters"
	"github.com/b10x/connector-mcp/internal/controllers"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
	"github.com/b10x/connector-mcp/internal/ociregistry"
	"github.com/b10x/connector-mcp/internal/packstore"
)

// NewResolver builds the profile resolver the manager uses: the pack verifier over the
// egress-guarded registry client, under the cluster trust policy of o. The gateway builds the same
// one, so a profile verifies in both or in neither. m may be nil. With o.VerifiedPackNamespace set,
// its verifier reads the manager's verified-pack store (read-only) while a registry is
// unavailable.
func NewResolver(mgr ctrl.Manager, o Options, m *controllers.Metrics) (*activation.Resolver, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	ip, err := ipPolicy(mgr.GetConfig(), o)
	if err != nil {
		return nil, err
	}
	// The gateway reads the manager's verified-pack store (never writes it), so that a
	// gateway restarted during a registry outage serves what the manager verified.
	var store ociregistry.BlobStore
	if o.VerifiedPackNamespace != "" {
		ro, err := packstore.New(o.VerifiedPackNamespace, mgr.GetAPIReader(), nil, packstore.DefaultMaxBytes, ctrl.Log.WithName("verified-pack-store"))
		if err != nil {
			return nil, err
		}
		store = ro
	}
	deny, err := ClusterDeny(mgr, o)
	if err != nil {
		return nil, err
	}
	// The gateway reads pull and public-key Secrets uncached, by name, in the profile's namespace:
	// it holds no Secret informer and needs no cluster-wide Secret right, only each namespace's
	// consent (a RoleBinding; elsewhere credential_consent_missing).
	return newResolverReading(mgr, o, ip, deny, m, store, mgr.GetAPIReader())
}

// newResolver builds the resolver; store, when not nil, is the verified-pack store of the
// anonymous registry client (the manager's; the gateway has none).
func newResolver(mgr ctrl.Manager, o Options, ip egress.IPPolicy, deny k8sbinding.DenySource, m *controllers.Metrics, store ociregistry.BlobStore) (*activation.Resolver, error) {
	return newResolverReading(mgr, o, ip, deny, m, store, mgr.GetClient())
}

// newResolverReading is newResolver whose verifier reads Secrets through secrets.
func newResolverReading(mgr ctrl.Manager, o Options, ip egress.IPPolicy, deny k8sbinding.DenySource, m *controllers.Metrics, store ociregistry.BlobStore, secrets client.Reader) (*activation.Resolver, error) {
	verifier, err := packVerifier(mgr, o, ip, deny, store, secrets)
	if err != nil {
		return nil, err
	}
	res := &activation.Resolver{Verifier: verifier, RequireProvenance: !o.SkipProvenanceUnsafe}
	if m != nil {
		res.CacheHits, res.CacheMisses = m.VerificationCacheHits, m.VerificationCacheMisses
	}
	return res, nil
}

// packVerifier builds the OCI pack verifier over an egress-guarded registry client.
func packVerifier(mgr ctrl.Manager, o Options, ip egress.IPPolicy, deny k8sbinding.DenySource, store ociregistry.BlobStore, secrets client.Reader) (*adapters.PackVerifier, error) {
	tlsCfg, err := o.TLSClientConfig()
	if err != nil {
		return nil, err
	}
	hc, err := registryHTTPClient(ip, deny, tlsCfg, o.ExchangeTimeout)
	if err != nil {
		return nil, err
	}
	trusted, err := loadTrustedRoot(o, hc)
	if err != nil {
		return nil, err
	}
	reg := ociregistry.Client{HTTPClient: hc, PlainHTTP: o.AllowLoopbackUnsafe}
	if store != nil {
		// Anonymous pulls read and write the store; a client given a pull secret's
		// credentials does not use it (ociregistry.Client.Store).
		reg.Store = store
	}
	opts := []ociregistry.VerifierOption{ociregistry.WithStrictKeyless()}
	if !o.KeylessWithoutTlogUnsafe {
		opts = append(opts, ociregistry.WithKeylessTransparencyLog(1))
	}
	if o.KeylessRequireSignedTimestamp {
		opts = append(opts, ociregistry.WithKeylessSignedTimestamps(1))
	}
	waived, _ := o.WaivedChecks()
	v := &adapters.PackVerifier{
		Registry:             reg,
		Secrets:              secrets,
		Trust:                mgr.GetClient(),
		SkipProvenanceUnsafe: o.SkipProvenanceUnsafe,
		Waived:               waived,
		NewVerifier: func(c *ociregistry.Client) *ociregistry.Verifier {
			return ociregistry.NewVerifier(c, trusted, append(opts, ociregistry.WithCacheSize(0))...)
		},
	}
	shared := reg
	v.Verifier = ociregistry.NewVerifier(&shared, trusted, opts...)
	platform, err := o.platformSource()
	if err != nil {
		return nil, err
	}
	v.Platform = platform
	return v, nil
}

// platformSource is the manager's own trust source from its --default-* flags, or nil when they
// name no signer.
func (o *Options) platformSource() (*adapters.TrustSource, error) {
	src := &adapters.TrustSource{Name: adapters.TrustSourcePlatform}
	if o.DefaultIssuer != "" {
		src.Signers = append(src.Signers, adapters.TrustSigner{Name: "default-keyless",
			Keyless: &v1.KeylessIdentity{Issuer: o.DefaultIssuer, Subject: o.DefaultSubject, SubjectRegExp: o.DefaultSubjectRegExp}})
	}
	if o.DefaultPublicKeyPath != "" {
		pem, err := os.ReadFile(o.DefaultPublicKeyPath)
		if err != nil {
			return nil, fmt.Errorf("--default-public-key: %w", err)
		}
		k, err := ociregistry.ParsePublicKey(pem)
		if err != nil {
			return nil, fmt.Errorf("--default-public-key: %w", err)
		}
		src.Signers = append(src.Signers, adapters.TrustSigner{Name: "default-key", PublicKey: k})
	}
	if o.DefaultSourceRepository != "" {
		src.Provenance = []v1.ProvenancePolicy{{BuilderID: o.DefaultBuilderID, SourceRepository: o.DefaultSourceRepository, SourceRef: o.DefaultSourceRef}}
	}
	if len(src.Signers) == 0 {
		return nil, nil
	}
	return src, nil
}
