package envtest

// Sharding story: two managers, each with --watch-label-selector for its own shard, share one
// namespace. Each verifies and activates only its shard's objects; an object in no shard is left
// alone; collisions are judged across shards (the claim index holds every deployment).

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/controllers"
	"github.com/b10x/connector-mcp/internal/mcptest"
)

// sharded labels o into shard (the documented shard key) and returns it.
func sharded[T client.Object](o T, shard string) T {
	o.SetLabels(map[string]string{controllers.ShardLabel: shard})
	return o
}

// wrongShardWindow is how long the shard story gives a wrong manager to act on objects outside
// its shard before asserting that it did not.
const wrongShardWindow = 2 * time.Second

func TestStoryShardsSplitTheWorkAndJudgeCollisionsAcross(t *testing.T) {
	ns := newNamespace(t, "story-shard")
	o1, o2 := devOptions(), devOptions()
	o1.WatchLabelSelector = controllers.ShardLabel + " in (shard1)"
	o2.WatchLabelSelector = controllers.ShardLabel + " in (shard2)"
	shard1 := startOperator(t, ns, o1)
	shard2 := startOperator(t, ns, o2)
	_, h := modernServer(mcptest.DefaultTools())
	live := startSwitchable(t, h)
	doc := reviewedProfile(t, live.URL)
	makeGrant(t, ns, "all")

	// Shard 1's objects: activated by shard 1's manager alone.
	mustCreate(t, sharded(inlineProfile(ns, "svc1", doc), "shard1"))
	holder := sharded(newDeployment(ns, "holder", "svc1", "provider-a", live.URL+"/a", doc, nil, "all"), "shard1")
	mustCreate(t, holder)
	waitObj(t, holder, storyTimeout, "holder Ready", isReady[*apiv1.ServiceDeployment])
	// An object in no shard: neither manager writes it.
	mustCreate(t, inlineProfile(ns, "orphan", doc))
	orphan := newDeployment(ns, "orphan", "orphan", "provider-o", live.URL+"/o", doc, nil, "all")
	mustCreate(t, orphan)
	// A window, not a condition: the assertion is that neither manager acts. The unsharded
	// objects are outside both managers' informers (the selector is applied by the apiserver),
	// so no event reaches a manager whose handling could be waited for.
	<-time.After(wrongShardWindow)
	if n := shard2.writes.Load(); n != 0 {
		t.Fatalf("shard 2's manager wrote %d times while only shard 1 and unsharded objects existed", n)
	}
	if shard1.writes.Load() == 0 {
		t.Fatal("shard 1's manager wrote nothing")
	}
	if err := k8sClient.Get(context.Background(), objKey(orphan), orphan); err != nil || len(orphan.Status.Conditions) != 0 {
		t.Fatalf("a deployment in no shard was reconciled (err %v): %s", err, describeStatus(orphan))
	}

	// Shard 2's objects: one that claims shard 1's provider is refused, naming the holder; one
	// that claims nothing held activates.
	// (Each with a profile of its own Connection: operations are claimed per Connection.)
	doc2, doc3 := doc.DeepCopy(), doc.DeepCopy()
	doc2.Service = apiv1.ServiceIdentity{Ref: "svc2", ConnectionRef: "conn2"}
	doc3.Service = apiv1.ServiceIdentity{Ref: "svc3", ConnectionRef: "conn3"}
	mustCreate(t, sharded(inlineProfile(ns, "svc2", doc2), "shard2"))
	mustCreate(t, sharded(inlineProfile(ns, "svc3", doc3), "shard2"))
	ok := sharded(newDeployment(ns, "own", "svc2", "provider-b", live.URL+"/b", doc2, nil, "all"), "shard2")
	mustCreate(t, ok)
	waitObj(t, ok, storyTimeout, "shard 2's own deployment Ready", isReady[*apiv1.ServiceDeployment])
	claimant := sharded(newDeployment(ns, "claimant", "svc3", "provider-a", live.URL+"/c", doc3, nil, "all"), "shard2")
	mustCreate(t, claimant)
	claimant = refusedWith(t, claimant, apiv1.ReasonProviderCollision)
	if msg := condOf(claimant, apiv1.ConditionBound).Message; !strings.Contains(msg, ns+"/holder") {
		t.Fatalf("the cross-shard refusal does not name the holder: %q", msg)
	}
	if shard2.writes.Load() == 0 {
		t.Fatal("shard 2's manager wrote nothing for its own objects")
	}
	// The holder (shard 1) leaves: shard 2's manager sees it through its claim index and the
	// claimant takes over.
	if err := k8sClient.Delete(context.Background(), holder); err != nil {
		t.Fatal(err)
	}
	waitObj(t, claimant, storyTimeout, "claimant Ready after the holder in the other shard left", isReady[*apiv1.ServiceDeployment])
}

// TestStoryShardStopStallsOnlyItsShardAndRebalances: stopping shard 1's manager stalls only shard
// 1 — a change to its deployment waits (its observed generation lags) while a change in shard 2
// is reconciled — and the documented re-balance, relabelling the profile and then the deployment
// into shard 2, lets shard 2's manager take them over and reconcile the change.
func TestStoryShardStopStallsOnlyItsShardAndRebalances(t *testing.T) {
	ns := newNamespace(t, "story-rebalance")
	o1, o2 := devOptions(), devOptions()
	o1.WatchLabelSelector = controllers.ShardLabel + " in (shard1)"
	o2.WatchLabelSelector = controllers.ShardLabel + " in (shard2)"
	shard1 := startOperator(t, ns, o1)
	startOperator(t, ns, o2)
	_, h := modernServer(mcptest.DefaultTools())
	live := startSwitchable(t, h)
	doc := reviewedProfile(t, live.URL)
	makeGrant(t, ns, "all")
	deploy := func(name, shard string) *apiv1.ServiceDeployment {
		d := doc.DeepCopy()
		d.Service = apiv1.ServiceIdentity{Ref: name, ConnectionRef: name}
		mustCreate(t, sharded(inlineProfile(ns, name, d), shard))
		sd := sharded(newDeployment(ns, name, name, "provider-"+name, live.URL+"/"+name, d, nil, "all"), shard)
		mustCreate(t, sd)
		return waitObj(t, sd, storyTimeout, name+" Ready", isReady[*apiv1.ServiceDeployment])
	}
	moving, staying := deploy("moving", "shard1"), deploy("staying", "shard2")
	caughtUp := func(d *apiv1.ServiceDeployment) bool {
		return d.Status.ObservedGeneration == d.Generation && isReady(d)
	}

	shard1.stop()
	hide := func(sd *apiv1.ServiceDeployment) { sd.Spec.Operations[0].Expose = false }
	mutate(t, moving, hide)
	mutate(t, staying, hide)
	waitObj(t, staying, storyTimeout, "shard 2 reconciles its own change", caughtUp)
	// A window, not a condition: nothing runs that could reconcile the stopped shard's object.
	<-time.After(wrongShardWindow)
	if err := k8sClient.Get(context.Background(), objKey(moving), moving); err != nil {
		t.Fatal(err)
	}
	if caughtUp(moving) {
		t.Fatalf("a change in the stopped shard was reconciled: %s", describeStatus(moving))
	}

	// Re-balance: the profile first, then its deployment.
	relabel := func(o client.Object) {
		mutate(t, o, func(o client.Object) { o.SetLabels(map[string]string{controllers.ShardLabel: "shard2"}) })
	}
	relabel(&apiv1.McpServiceProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: moving.Name}})
	relabel(moving)
	waitObj(t, moving, storyTimeout, "shard 2 took the relabelled deployment over", caughtUp)
}
