package managerapp

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/b10x/connector-mcp/internal/k8sbinding"
)

// CacheByObject is the manager cache's per-type configuration: the Secret informer sees only
// Secrets labelled connectors.b10x.io/credential=true, and holds them without managedFields and
// without kubectl's last-applied-configuration annotation (a plaintext copy of the data); the
// ConfigMap informer sees only ConfigMaps labelled connectors.b10x.io/ca-bundle=true; the
// RoleBinding informer holds them without subjects (the grant check reads only roleRef; callers
// are authorized with SubjectAccessReviews). Pass it as cache.Options.ByObject.
func CacheByObject() map[client.Object]cache.ByObject {
	secrets := k8sbinding.CredentialCacheSelector()
	secrets.Transform = leanSecret
	return map[client.Object]cache.ByObject{
		&corev1.Secret{}:      secrets,
		&corev1.ConfigMap{}:   k8sbinding.CABundleCacheSelector(),
		&rbacv1.RoleBinding{}: {Transform: leanRoleBinding},
	}
}

// lastAppliedAnnotation is kubectl's client-side apply record.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// leanSecret is the cache transform of Secrets: no managedFields, no last-applied copy.
func leanSecret(o any) (any, error) {
	if s, ok := o.(*corev1.Secret); ok {
		s.ManagedFields = nil
		delete(s.Annotations, lastAppliedAnnotation)
	}
	return o, nil
}

// leanRoleBinding is the cache transform of RoleBindings: no managedFields, no subjects, no
// annotations (the grant check reads only the name and roleRef).
func leanRoleBinding(o any) (any, error) {
	if rb, ok := o.(*rbacv1.RoleBinding); ok {
		rb.ManagedFields, rb.Subjects, rb.Annotations = nil, nil, nil
	}
	return o, nil
}

// ErrWatchLabelSelector is returned (wrapped) by Options.Validate and ShardSelector for a
// --watch-label-selector that does not parse.
var ErrWatchLabelSelector = errors.New("--watch-label-selector does not parse as a label selector")

// ShardSelector parses WatchLabelSelector: nil when empty (every object).
func (o *Options) ShardSelector() (labels.Selector, error) {
	if strings.TrimSpace(o.WatchLabelSelector) == "" {
		return nil, nil
	}
	sel, err := labels.Parse(o.WatchLabelSelector)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrWatchLabelSelector, err)
	}
	return sel, nil
}

// CacheOptions is the manager cache configuration: CacheByObject (only opted-in Secrets), and
// managedFields stripped from every cached object (no controller reads them; they are often the
// larger part of an object). Every shard caches every profile and deployment: collisions are
// judged across shards.
func CacheOptions() cache.Options {
	return cache.Options{ByObject: CacheByObject(), DefaultTransform: cache.TransformStripManagedFields()}
}

// LeaderElectionID is the leader election lease name of a manager watching selector: the
// shards of one installation each elect their own leader (as Flux's shards do).
func LeaderElectionID(selector string) string {
	const base = "connector-mcp.connectors.b10x.io"
	if strings.TrimSpace(selector) == "" {
		return base
	}
	sum := sha256.Sum256([]byte(selector))
	return fmt.Sprintf("%x-%s", sum[:4], base)
}
