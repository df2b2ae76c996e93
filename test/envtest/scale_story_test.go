package envtest

// Scale story: many deployments against one local server, from creation to all Ready.
// `make bench` runs it; BENCH_DEPLOYMENTS (default 200) sets the count, e.g. 1000 for the long
// run. Reported: seconds to all-Ready, reconciles/s, API writes per object, manager RSS.

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/mcptest"
)

func BenchmarkStoryActivateDeployments(b *testing.B) {
	n := 200
	if v, err := strconv.Atoi(os.Getenv("BENCH_DEPLOYMENTS")); err == nil && v > 0 {
		n = v
	}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		runActivationScale(b, n)
	}
}

func runActivationScale(b *testing.B, n int) {
	ns := newNamespaceTB(b, "bench")
	o := devOptions()
	o.RetryInterval = time.Second
	op := startOperator(b, ns, o)
	_, h := modernServer(mcptest.DefaultTools())
	live := startSwitchable(b, h)
	base := reviewedProfile(b, live.URL)
	makeGrant(b, ns, "all")

	b.StartTimer()
	start := time.Now()
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("svc-%04d", i)
		doc := base.DeepCopy()
		doc.Service = apiv1.ServiceIdentity{Ref: name, ConnectionRef: name}
		mustCreate(b, inlineProfile(ns, name, doc))
		mustCreate(b, newDeployment(ns, name, name, name, fmt.Sprintf("%s/%d", live.URL, i), doc, nil, "all"))
	}
	deadline := time.Now().Add(10 * time.Minute)
	for {
		var list apiv1.ServiceDeploymentList
		if err := k8sClient.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			b.Fatal(err)
		}
		ready := 0
		for i := range list.Items {
			if isReady(&list.Items[i]) {
				ready++
			}
		}
		if ready == n {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d deployments Ready after 10 minutes", ready, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()

	reconciles := 0
	op.mu.Lock()
	for k, v := range op.gets {
		if strings.HasPrefix(k, ns+"/") {
			reconciles += v
		}
	}
	op.mu.Unlock()
	b.ReportMetric(elapsed.Seconds(), "s-to-all-ready")
	b.ReportMetric(float64(reconciles)/elapsed.Seconds(), "deployment-reconciles/s")
	b.ReportMetric(float64(op.writes.Load())/float64(2*n), "writes/object")
	b.ReportMetric(float64(rssBytes())/(1<<20), "process-RSS-MiB")
	b.ReportMetric(float64(n), "deployments")
}

// rssBytes is the resident set size of this process (manager, apiserver client and test
// servers share it; the control plane runs in separate processes).
func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}
