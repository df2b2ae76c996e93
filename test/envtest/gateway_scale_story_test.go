package envtest

// Gateway scale story: a gateway starting in front of N Ready deployments (BENCH_GATEWAY_DEPLOYMENTS,
// comma-separated, default 10000), each with its own inline profile, as the manager leaves them.
// The gateway runs as its own process (cmd/gateway, development flags). Reported: seconds from
// its start until it serves every deployment (connector_mcp_gateway_surfaces: each profile
// verified again by the gateway, each surface built), its heap (go_memstats_heap_alloc_bytes)
// and RSS then; one call through it must answer.

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/mcptest"
	"github.com/b10x/connector-mcp/ocipack"
)

func BenchmarkStoryGatewayServes(b *testing.B) {
	sizes, err := benchSizes("BENCH_GATEWAY_DEPLOYMENTS", "10000")
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("deployments=%d", n), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				runGatewayScale(b, n)
			}
		})
	}
}

func runGatewayScale(b *testing.B, n int) {
	ns := newNamespaceTB(b, "gwbench")
	_, h := modernServer(mcptest.DefaultTools())
	live := startSwitchable(b, h)
	base := reviewedProfile(b, live.URL)
	makeGrant(b, ns, "all")
	mustCreate(b, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"}})
	b.Cleanup(func() { deleteScaleObjects(b, ns) })
	seedStart := time.Now()
	if err := seedReadyDeployments(ns, live.URL, base, n); err != nil {
		b.Fatalf("seed: %v", err)
	}
	b.Logf("seeded %d Ready deployments in %.1f s", n, time.Since(seedStart).Seconds())

	listen, metricsAddr, probeAddr := freeLoopbackAddr(b), freeLoopbackAddr(b), freeLoopbackAddr(b)
	b.StartTimer()
	start := time.Now()
	gw := startProcess(b, builtBinary(b, "./cmd/gateway"), []string{
		"--listen-address=" + listen, "--plain-http-unsafe", "--metrics-bind-address=" + metricsAddr, "--metrics-secure=false",
		"--health-probe-bind-address=" + probeAddr, "--audit-log=none", "--skip-provenance-unsafe", "--allow-loopback-unsafe",
	}, metricsAddr, probeAddr, "")
	served := 0.0
	if !pollUntil(100*time.Millisecond, 3*time.Minute, func() bool {
		select {
		case <-gw.exited:
			b.Fatalf("the gateway exited serving %.0f of %d deployments:\n%s", served, n, gw.logTail())
		default:
		}
		v, err := sumSamples(gw.scrape(b), "connector_mcp_gateway_surfaces", nil)
		served = v
		return err == nil && int(v) == n
	}) {
		b.Fatalf("the gateway serves %.0f of %d deployments after 3 minutes:\n%s", served, n, gw.logTail())
	}
	serving := time.Since(start)
	b.StopTimer()
	heap, err := sumSamples(gw.scrape(b), "go_memstats_heap_alloc_bytes", nil)
	if err != nil {
		b.Fatal(err)
	}
	rss := gw.stats(b).RSSBytes

	cs, err := mcpConnect(b, fmt.Sprintf("http://%s/mcp/%s/svc-%05d", listen, ns, n/2), mintToken(b, ns, "agent", "connector-mcp"), "")
	if err != nil {
		b.Fatal(err)
	}
	if res, err := callTool(cs, "echo", map[string]any{"text": "scale"}); err != nil || res.IsError {
		b.Fatalf("a call through the gateway: %+v, %v", res, err)
	}
	b.Logf("%d deployments: the gateway (cmd/gateway) served all %.1f s after its start; heap %.1f MiB, RSS %.1f MiB", n, serving.Seconds(), heap/(1<<20), float64(rss)/(1<<20))
	b.ReportMetric(serving.Seconds(), "s-to-serving-all")
	b.ReportMetric(heap/(1<<20), "gateway-heap-MiB")
	b.ReportMetric(float64(rss)/(1<<20), "gateway-RSS-MiB")
	b.ReportMetric(float64(n), "deployments")
}

// seedReadyDeployments creates n profiles and deployments in ns (as createScaleObjects) with
// eight creators and gives each deployment the status the manager writes on activation: Ready,
// the frozen snapshot and the profile digest active, the generation observed.
func seedReadyDeployments(ns, liveURL string, base *apiv1.ProfileDocument, n int) error {
	return createPairs(n, func(i int) error {
		name := fmt.Sprintf("svc-%05d", i)
		doc := base.DeepCopy()
		doc.Service = apiv1.ServiceIdentity{Ref: name, ConnectionRef: name}
		if err := k8sClient.Create(context.Background(), inlineProfile(ns, name, doc)); err != nil {
			return err
		}
		sd := newDeployment(ns, name, name, name, fmt.Sprintf("%s/%d", liveURL, i), doc, nil, "all")
		if err := k8sClient.Create(context.Background(), sd); err != nil {
			return err
		}
		pd, err := ocipack.ProfileDigest(doc)
		if err != nil {
			return err
		}
		now := metav1.Now()
		sd.Status.ObservedGeneration = sd.Generation
		sd.Status.ActiveSnapshotDigest, sd.Status.ProfileDigest, sd.Status.LastFrozenTime = doc.Snapshot.Digest, pd, &now
		meta.SetStatusCondition(&sd.Status.Conditions, metav1.Condition{Type: apiv1.ConditionReady, Status: metav1.ConditionTrue,
			ObservedGeneration: sd.Generation, Reason: apiv1.ReasonActivated, Message: "seeded"})
		return k8sClient.Status().Update(context.Background(), sd)
	})
}
