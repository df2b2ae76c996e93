package managerapp

import (
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/b10x/connector-mcp/internal/appoptions"
)

// CacheOptions is the manager cache configuration: appoptions.CacheByObject (only opted-in
// Secrets and CA-bundle ConfigMaps, lean Secrets and RoleBindings), and managedFields stripped
// from every cached object (no controller reads them; they are often the larger part of an
// object). Every shard caches every profile and deployment: collisions are judged across shards.
func CacheOptions() cache.Options {
	return cache.Options{ByObject: appoptions.CacheByObject(), DefaultTransform: cache.TransformStripManagedFields()}
}
