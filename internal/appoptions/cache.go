package appoptions

import (
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/b10x/connector-mcp/internal/k8sbinding"
)

// CacheByObject is the per-type cache configuration of the manager and the gateway: the Secret
// informer sees only Secrets labelled connectors.b10x.io/credential=true, and holds them without
// managedFields and without kubectl's last-applied-configuration annotation (a plaintext copy of
// the data); the ConfigMap informer sees only ConfigMaps labelled connectors.b10x.io/ca-bundle=true;
// the RoleBinding informer holds them without subjects (the grant check reads only roleRef;
// callers are authorized with SubjectAccessReviews). Pass it as cache.Options.ByObject.
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
