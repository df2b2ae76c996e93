package envtest

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/mcptest"
)

// TestStoryReverifyRequests: McpReverifyRequests (what the gateway creates on live drift) make
// the manager re-freeze a deployment with no periodic re-verification configured; a burst of
// them is coalesced into request-driven freezes at most once per ReverifyRequestMinInterval, and
// every one is deleted once satisfied. The twin: a request naming no deployment causes no freeze
// and is deleted.
func TestStoryReverifyRequests(t *testing.T) {
	ns := newNamespace(t, "story-reverify")
	startOperator(t, ns, devOptions())
	_, h := modernServer(mcptest.DefaultTools())
	live := startSwitchable(t, h)
	doc := reviewedProfile(t, live.URL)
	makeGrant(t, ns, "all")
	mustCreate(t, inlineProfile(ns, "svc", doc))
	sd := newDeployment(ns, "svc", "svc", "svc", live.URL, doc, nil, "all")
	mustCreate(t, sd)
	sd = waitObj(t, sd, storyTimeout, "Ready", isReady[*apiv1.ServiceDeployment])
	first := sd.Status.LastFrozenTime.Time

	requests := func() int {
		var l apiv1.McpReverifyRequestList
		if err := k8sClient.List(t.Context(), &l, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		return len(l.Items)
	}
	// The twin first: a request for a deployment that does not exist is deleted, nothing froze.
	hits := live.hits.Load()
	mustCreate(t, &apiv1.McpReverifyRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ghost"},
		Spec: apiv1.McpReverifyRequestSpec{DeploymentName: "ghost"}})
	eventually(t, storyTimeout, "the request naming no deployment deleted", func() error {
		if n := requests(); n != 0 {
			return fmt.Errorf("%d request(s) remain", n)
		}
		return nil
	})
	if live.hits.Load() != hits {
		t.Fatal("a request naming no deployment made the manager contact the server")
	}

	// A burst of requests for the deployment, one second after its freeze.
	time.Sleep(time.Until(first.Add(1100 * time.Millisecond)))
	for i := range 5 {
		mustCreate(t, &apiv1.McpReverifyRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("burst-%d", i)},
			Spec: apiv1.McpReverifyRequestSpec{DeploymentName: "svc", Reason: apiv1.ReverifyReasonLiveDrift}})
	}
	sd = waitObj(t, sd, storyTimeout, "re-frozen on request", func(d *apiv1.ServiceDeployment) bool {
		return d.Status.LastFrozenTime != nil && d.Status.LastFrozenTime.After(first)
	})
	if gap := sd.Status.LastFrozenTime.Sub(first); gap < apiv1.ReverifyRequestMinInterval {
		t.Fatalf("the request-driven freeze came %v after the last one, within ReverifyRequestMinInterval", gap)
	}
	eventually(t, storyTimeout, "the satisfied requests deleted", func() error {
		if n := requests(); n != 0 {
			return fmt.Errorf("%d request(s) remain", n)
		}
		return nil
	})
	if !isReady(sd) {
		t.Fatal("the unchanged server's deployment is no longer Ready after the re-verification")
	}
}
