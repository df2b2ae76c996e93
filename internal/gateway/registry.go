package gateway

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/b10x/connector-mcp/internal/activation"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/invocation"
)

// ProfileResolver verifies a profile's source and document under the cluster policy;
// *activation.Resolver (appoptions.Shared.NewResolver) implements it.
type ProfileResolver interface {
	Resolve(ctx context.Context, p *apiv1.McpServiceProfile) (*activation.Resolved, *activation.StageError)
}

var _ ProfileResolver = (*activation.Resolver)(nil)

// Registry keeps one invocation.Surface per ServiceDeployment that is Ready for its current
// generation, in step with the informer cache: a surface is built (from the profile document
// this gateway verified itself) when a deployment activates and dropped on the event that says
// it is no longer Ready, no longer verifies, or is gone. It is safe for concurrent use.
type Registry struct {
	// Client reads deployments and profiles from the informer cache.
	Client client.Reader
	// Resolver verifies profiles with the manager's policy.
	Resolver ProfileResolver
	// Surface configures every surface (Connector, Authorizer, Schemas, bounds, Audit).
	Surface invocation.Options
	// RetryInterval is the delay before retrying a transient or waiting verification failure
	// (zero: 30s).
	RetryInterval time.Duration
	// Log receives registry changes (nil: discard).
	Log logr.Logger

	mu       sync.RWMutex
	surfaces map[types.NamespacedName]*entry
	// byNS indexes surfaces by namespace, so that a search restricted to a namespace costs
	// O(deployments of that namespace), not O(every served deployment).
	byNS map[string]map[string]*entry
}

// entry is one served surface and what it was built from.
type entry struct {
	surface *invocation.Surface
	key     string
}

// Lookup returns the surface of deployment ns/name.
func (r *Registry) Lookup(ns, name string) (*invocation.Surface, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.surfaces[types.NamespacedName{Namespace: ns, Name: name}]
	if !ok {
		return nil, false
	}
	return e.surface, true
}

// Surfaces returns every served surface, sorted by namespace and name.
func (r *Registry) Surfaces() []*invocation.Surface {
	r.mu.RLock()
	out := make([]*invocation.Surface, 0, len(r.surfaces))
	for _, e := range r.surfaces {
		out = append(out, e.surface)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Target(), out[j].Target()
		return a.Namespace < b.Namespace || (a.Namespace == b.Namespace && a.Name < b.Name)
	})
	return out
}

// SurfacesIn returns the served surfaces of namespace ns, sorted by name. Its cost is that of
// the namespace's deployments only (the registry keeps an index by namespace).
func (r *Registry) SurfacesIn(ns string) []*invocation.Surface {
	r.mu.RLock()
	in := r.byNS[ns]
	out := make([]*invocation.Surface, 0, len(in))
	for _, e := range in {
		out = append(out, e.surface)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Target().Name < out[j].Target().Name })
	return out
}

// Namespaces returns the namespaces with at least one served surface, sorted.
func (r *Registry) Namespaces() []string {
	r.mu.RLock()
	out := make([]string, 0, len(r.byNS))
	for ns := range r.byNS {
		out = append(out, ns)
	}
	r.mu.RUnlock()
	sort.Strings(out)
	return out
}

// Len returns the number of served surfaces.
func (r *Registry) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.surfaces)
}

// Put serves s for its deployment, replacing (and closing) the previous surface.
func (r *Registry) put(key types.NamespacedName, s *invocation.Surface, built string) {
	r.mu.Lock()
	if r.surfaces == nil {
		r.surfaces = map[types.NamespacedName]*entry{}
		r.byNS = map[string]map[string]*entry{}
	}
	old := r.surfaces[key]
	e := &entry{surface: s, key: built}
	r.surfaces[key] = e
	if r.byNS[key.Namespace] == nil {
		r.byNS[key.Namespace] = map[string]*entry{}
	}
	r.byNS[key.Namespace][key.Name] = e
	r.mu.Unlock()
	if old != nil && old.surface != s {
		_ = old.surface.Close()
	}
}

// Remove stops serving deployment key at once.
func (r *Registry) Remove(key types.NamespacedName) {
	r.mu.Lock()
	old := r.surfaces[key]
	delete(r.surfaces, key)
	if in := r.byNS[key.Namespace]; in != nil {
		delete(in, key.Name)
		if len(in) == 0 {
			delete(r.byNS, key.Namespace)
		}
	}
	r.mu.Unlock()
	if old != nil {
		_ = old.surface.Close()
		r.Log.Info("Stopped serving deployment", "namespace", key.Namespace, "name", key.Name)
	}
}

// Close stops serving every deployment.
func (r *Registry) Close() {
	r.mu.Lock()
	all := r.surfaces
	r.surfaces, r.byNS = nil, nil
	r.mu.Unlock()
	for _, e := range all {
		_ = e.surface.Close()
	}
}

func (r *Registry) builtKey(key types.NamespacedName) string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if e, ok := r.surfaces[key]; ok {
		return e.key
	}
	return ""
}

// Reconcile brings the surface of one deployment in step with the cache.
func (r *Registry) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sd := &apiv1.ServiceDeployment{}
	if err := r.Client.Get(ctx, req.NamespacedName, sd); err != nil {
		r.Remove(req.NamespacedName)
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	st := sd.Status
	if !sd.DeletionTimestamp.IsZero() || sd.Spec.Suspend || st.ActiveSnapshotDigest == "" || st.ObservedGeneration != sd.Generation ||
		!apimeta.IsStatusConditionTrue(st.Conditions, apiv1.ConditionReady) {
		r.Remove(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	prof := &apiv1.McpServiceProfile{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: sd.Namespace, Name: sd.Spec.ProfileRef.Name}, prof); err != nil {
		r.Remove(req.NamespacedName)
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	built := string(sd.UID) + "/" + sd.ResourceVersion + "/" + string(prof.UID) + "/" + prof.ResourceVersion
	if r.builtKey(req.NamespacedName) == built {
		return ctrl.Result{}, nil
	}
	res, serr := r.Resolver.Resolve(ctx, prof)
	if serr != nil {
		r.Remove(req.NamespacedName)
		r.Log.Info("Profile does not verify here; deployment not served", "namespace", sd.Namespace, "name", sd.Name, "reason", serr.Reason())
		if serr.Transient() || serr.Waiting() {
			// A waiting refusal (a trust policy or key Secret this gateway's cache has not seen
			// yet, while the manager already has) clears with an arrival this registry does not
			// watch: retried like a transient failure.
			return ctrl.Result{RequeueAfter: r.retryInterval()}, nil
		}
		return ctrl.Result{}, nil
	}
	s, err := invocation.NewSurface(res.Document, sd, r.surfaceOptions())
	if err != nil {
		r.Remove(req.NamespacedName)
		r.Log.Info("Deployment not served", "namespace", sd.Namespace, "name", sd.Name, "reason", invocation.Outcome(err))
		return ctrl.Result{}, nil
	}
	r.put(req.NamespacedName, s, built)
	r.Log.Info("Serving deployment", "namespace", sd.Namespace, "name", sd.Name, "snapshot", s.SnapshotDigest(), "operations", len(s.Operations()))
	return ctrl.Result{}, nil
}

// surfaceOptions is r.Surface with its Audit quiet for the "list" of a search_operations call
// (marked on the context by the search, which records one event of its own instead of one per
// deployment).
func (r *Registry) surfaceOptions() invocation.Options {
	o := r.Surface
	if next := o.Audit; next != nil {
		o.Audit = func(ctx context.Context, e invocation.AuditEvent) {
			if e.Action == "list" && ctx.Value(searchCtxKey{}) != nil {
				return
			}
			next(ctx, e)
		}
	}
	return o
}

func (r *Registry) retryInterval() time.Duration {
	if r.RetryInterval > 0 {
		return r.RetryInterval
	}
	return 30 * time.Second
}

// SetupWithManager watches ServiceDeployments (every change, status included) and the profiles
// they reference (through the ProfileRefIndex field index, which it registers). The controller
// runs on every replica (no leader election).
func (r *Registry) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &apiv1.ServiceDeployment{}, ProfileRefIndex, profileRefOf); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&apiv1.ServiceDeployment{}).
		Named("gateway-servicedeployment").
		WithOptions(controller.Options{MaxConcurrentReconciles: 4, NeedLeaderElection: ptrFalse()}).
		Watches(&apiv1.McpServiceProfile{}, handler.EnqueueRequestsFromMapFunc(r.byProfile)).
		Complete(r)
}

func ptrFalse() *bool { f := false; return &f }

// ProfileRefIndex is the field index of ServiceDeployments by spec.profileRef.name in the
// gateway's cache. Without it each profile event listed (and copied) every deployment of its
// namespace: with 10,000 the initial list of profiles took longer than the cache sync timeout.
const ProfileRefIndex = "spec.profileRef.name"

// profileRefOf is ProfileRefIndex's indexer.
func profileRefOf(o client.Object) []string {
	sd, ok := o.(*apiv1.ServiceDeployment)
	if !ok || sd.Spec.ProfileRef.Name == "" {
		return nil
	}
	return []string{sd.Spec.ProfileRef.Name}
}

// byProfile maps a profile to the deployments of its namespace that reference it.
func (r *Registry) byProfile(ctx context.Context, o client.Object) []reconcile.Request {
	list := &apiv1.ServiceDeploymentList{}
	if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingFields{ProfileRefIndex: o.GetName()}); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, sd := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: sd.Namespace, Name: sd.Name}})
	}
	return out
}

func keyOf(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}
