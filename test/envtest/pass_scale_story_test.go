package envtest

// Pass-scale benchmark: the time of one deployment's no-op pass does not grow with the number of
// other deployments in the cluster (issue 16: collisions by index, claims derived once). The pass
// runs through the manager's own reconciler and informer cache against a real kube-apiserver.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/managerapp"
	"github.com/b10x/connector-mcp/internal/mcptest"
)

// BenchmarkDeploymentPass times one Ready deployment's no-op pass with 100, then 10,000, other
// deployments in its namespace (suspended, sharing no provider, endpoint or operation with it).
// The 10,000 sub-benchmark reports x-of-100, the ratio of its time per pass to the 100 one's
// (issue 16: at most 1.5), and both report writes/pass (0 on a no-op pass).
func BenchmarkDeploymentPass(b *testing.B) {
	ns := newNamespaceTB(b, "pass")
	// The cache cmd/manager builds (managerapp.CacheOptions: every namespace), not the namespaced one
	// of the stories: a namespaced (multi-namespace) cache makes a REST mapping on every Get,
	// which was 62 % of the bytes a pass allocated, and cmd/manager does not pay it.
	op := startOperatorWith(b, cfg, []string{ns}, devOptions(), func(o *ctrl.Options) { o.Cache = managerapp.CacheOptions() })
	// envtest has no namespace controller: without this, the next benchmark's manager (which
	// watches every namespace) would cache and reconcile these 10,101 deployments too.
	b.Cleanup(func() { deleteScaleObjects(b, ns) })
	_, h := modernServer(mcptest.DefaultTools())
	live := startSwitchable(b, h)
	doc := reviewedProfile(b, live.URL)
	makeGrant(b, ns, "all")
	mustCreate(b, inlineProfile(ns, "svc", doc))
	probe := newDeployment(ns, "probe", "svc", "probe", live.URL, doc, nil, "all")
	mustCreate(b, probe)
	waitObj(b, probe, 2*time.Minute, "Ready", isReady[*apiv1.ServiceDeployment])

	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "probe"}}
	created := 0
	var base float64
	for _, n := range []int{100, 10000} {
		createUnrelated(b, ns, created, n)
		created = n
		waitCached(b, op, ns, n+1)
		// The manager's first passes over the new deployments (each writes Suspended once) are
		// over before the timing starts: the loop times the probe's pass in a quiet manager.
		waitSettled(b, op, ns, n)
		b.Run(fmt.Sprintf("deployments=%d", n), func(b *testing.B) {
			ctx := context.Background()
			writes := op.writes.Load()
			passes := 0
			for b.Loop() {
				if _, err := op.wired.Deployments.Reconcile(ctx, req); err != nil {
					b.Fatal(err)
				}
				passes++
			}
			perPass := float64(b.Elapsed().Nanoseconds()) / float64(passes)
			if n == 100 {
				base = perPass // with -count, each 10,000 run compares with the last 100 run
			} else if base > 0 {
				b.ReportMetric(perPass/base, "x-of-100")
			}
			// Every write counts: the manager is settled, so the probe's no-op passes must make
			// none (issue 16: 0 on a no-op pass).
			b.ReportMetric(float64(op.writes.Load()-writes)/float64(passes), "writes/pass")
		})
	}
}

// createUnrelated creates deployments from..to-1: suspended, each with its own provider,
// endpoint and operation reference.
func createUnrelated(b testing.TB, ns string, from, to int) {
	b.Helper()
	work := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				sd := &apiv1.ServiceDeployment{}
				sd.Namespace, sd.Name = ns, fmt.Sprintf("u%05d", i)
				sd.Spec = apiv1.ServiceDeploymentSpec{ProfileRef: apiv1.LocalObjectReference{Name: "absent"}, ProviderID: fmt.Sprintf("prov-u%d", i),
					Suspend:       true,
					MCPConnection: apiv1.MCPConnection{URL: fmt.Sprintf("https://u%d.example.com/mcp", i)},
					Operations:    []apiv1.OperationBinding{{OperationRef: fmt.Sprintf("op-u%d", i), EndpointRef: apiv1.EndpointRefMCPConnection, GrantRefs: []string{"all"}}}}
				if err := k8sClient.Create(context.Background(), sd); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := from; i < to; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		b.Fatalf("create unrelated deployments: %v", firstErr)
	}
}

// waitSettled waits until the manager has recorded Suspended on n deployments of ns.
func waitSettled(b testing.TB, op *operator, ns string, n int) {
	b.Helper()
	done := 0
	if !pollUntil(500*time.Millisecond, 10*time.Minute, func() bool {
		var list apiv1.ServiceDeploymentList
		if err := op.wired.Deployments.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			b.Fatal(err)
		}
		done = 0
		for i := range list.Items {
			if hasCondition(&list.Items[i], apiv1.ConditionReady, metav1.ConditionFalse, apiv1.ReasonSuspended) {
				done++
			}
		}
		return done == n
	}) {
		b.Fatalf("the manager recorded Suspended on %d of %d deployments", done, n)
	}
}

// waitCached waits until the manager's cache holds n deployments in ns.
func waitCached(b testing.TB, op *operator, ns string, n int) {
	b.Helper()
	held := 0
	if !pollUntil(200*time.Millisecond, 5*time.Minute, func() bool {
		var list apiv1.ServiceDeploymentList
		if err := op.wired.Deployments.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			b.Fatal(err)
		}
		held = len(list.Items)
		return held == n
	}) {
		b.Fatalf("the manager's cache holds %d of %d deployments", held, n)
	}
}
