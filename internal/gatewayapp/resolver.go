package gatewayapp

import (
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/b10x/connector-mcp/egress"
	"github.com/b10x/connector-mcp/internal/activation"
	"github.com/b10x/connector-mcp/internal/appoptions"
	"github.com/b10x/connector-mcp/internal/k8sbinding"
	"github.com/b10x/connector-mcp/internal/ociregistry"
	"github.com/b10x/connector-mcp/internal/packstore"
)

// newResolver builds the gateway's profile resolver (appoptions.Shared.NewResolver, as the
// manager's). With o.VerifiedPackNamespace set, its verifier reads the manager's verified-pack
// store (never writes it), so that a gateway restarted during a registry outage serves what the
// manager verified. Pull and public-key Secrets are read uncached, by name, in the profile's
// namespace: the gateway holds no Secret informer and needs no cluster-wide Secret right, only
// each namespace's consent (a RoleBinding; elsewhere credential_consent_missing).
func newResolver(mgr ctrl.Manager, o Options, ip egress.IPPolicy, deny k8sbinding.DenySource) (*activation.Resolver, error) {
	var store ociregistry.BlobStore
	if o.VerifiedPackNamespace != "" {
		ro, err := packstore.New(o.VerifiedPackNamespace, mgr.GetAPIReader(), nil, packstore.DefaultMaxBytes, ctrl.Log.WithName("verified-pack-store"))
		if err != nil {
			return nil, err
		}
		store = ro
	}
	return o.NewResolver(appoptions.ResolverInputs{IP: ip, Deny: deny, Secrets: mgr.GetAPIReader(), Trust: mgr.GetClient(), Store: store})
}
