package controllers

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/b10x/connector-mcp/api/v1"
)

// A pass that starts from a stale read (the informer cache has not yet seen the previous pass's
// status write) is refused by the optimistic lock: it neither overwrites the newer status nor
// announces the activation a second time. Twin: the same pass from a fresh read writes nothing
// and announces nothing either (a no-op), while the first, fresh pass did announce.
func TestStaleReadDoesNotAnnounceTwice(t *testing.T) {
	_, objs := world(t)
	h := newHarness(t, objs...)
	stale := h.deployment("sd")
	h.activate()
	if got := drain(h.events); len(got) != 2 || !strings.Contains(got[1], v1.ReasonActivated) {
		t.Fatalf("events of the first activation = %q", got)
	}
	active := h.deployment("sd")

	fresh := h.dep.Client
	h.dep.Client = interceptor.NewClient(h.c.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if sd, ok := obj.(*v1.ServiceDeployment); ok {
				stale.DeepCopyInto(sd)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		}})
	writes := h.writes
	_, err := h.dep.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "sd"}})
	h.dep.Client = fresh
	if err != nil {
		t.Fatalf("stale pass: %v", err)
	}
	if got := drain(h.events); len(got) != 0 {
		t.Fatalf("a stale pass announced %q", got)
	}
	// The pass either recognises its own previous write (no write) or is refused by the
	// optimistic lock (one refused patch); it never writes twice.
	if h.writes > writes+1 {
		t.Fatalf("the stale pass attempted %d writes, want at most the one refused patch", h.writes-writes)
	}
	if now := h.deployment("sd"); !equality.Semantic.DeepEqual(now.Status, active.Status) {
		t.Fatalf("the stale pass changed the status:\n%+v\n%+v", active.Status, now.Status)
	}

	writes = h.writes
	h.reconcileDeployment("sd")
	if got := drain(h.events); len(got) != 0 || h.writes != writes {
		t.Fatalf("a fresh pass after the refused stale one: events %q, %d writes", got, h.writes-writes)
	}
}

// The profile's twin: a verification pass from a stale read is refused by the optimistic lock and
// announces nothing; the status the fresh pass wrote stays; the pass runs again shortly.
func TestStaleProfileReadDoesNotAnnounceTwice(t *testing.T) {
	_, objs := world(t)
	h := newHarness(t, objs...)
	stale := h.profile("svc")
	h.reconcileProfile("svc")
	if got := drain(h.events); len(got) == 0 {
		t.Fatal("the first verification announced nothing")
	}
	verified := h.profile("svc")

	fresh := h.prof.Client
	h.prof.Client = interceptor.NewClient(h.c.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if p, ok := obj.(*v1.McpServiceProfile); ok {
				stale.DeepCopyInto(p)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		}})
	res, err := h.prof.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "svc"}})
	h.prof.Client = fresh
	if err != nil {
		t.Fatalf("stale pass: %v", err)
	}
	// No event brings the next pass (the profile's own status writes do not pass its watch's
	// predicate), and the stale pass may be the one that saw a dependency arrive: it runs
	// again as soon as the cache can have caught up, not after the retry interval.
	if res.RequeueAfter <= 0 || res.RequeueAfter > conflictRetry {
		t.Fatalf("the stale pass requeues after %s, want within %s", res.RequeueAfter, conflictRetry)
	}
	if got := drain(h.events); len(got) != 0 {
		t.Fatalf("a stale pass announced %q", got)
	}
	if now := h.profile("svc"); !equality.Semantic.DeepEqual(now.Status, verified.Status) {
		t.Fatalf("the stale pass changed the status:\n%+v\n%+v", verified.Status, now.Status)
	}
}
