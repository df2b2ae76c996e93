package managerapp

import (
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/b10x/connector-mcp/internal/packstore"
)

// setupPackStore builds the verified-pack store of o.VerifiedPackNamespace (nil when empty) and
// adds its Sweeper to mgr. The store reads with the manager's API reader: its ConfigMaps are not
// in the cache.
func setupPackStore(mgr ctrl.Manager, o Options) (*packstore.Store, error) {
	if o.VerifiedPackNamespace == "" {
		return nil, nil
	}
	log := ctrl.Log.WithName("verified-pack-store")
	store, err := packstore.New(o.VerifiedPackNamespace, mgr.GetAPIReader(), mgr.GetClient(), packstore.DefaultMaxBytes, log)
	if err != nil {
		return nil, err
	}
	sweeper := &packstore.Sweeper{Store: store, Profiles: mgr.GetClient(), Deleter: mgr.GetClient(), Interval: o.VerifiedPackSweepInterval, Log: log}
	if err := mgr.Add(sweeper); err != nil {
		return nil, err
	}
	return store, nil
}
