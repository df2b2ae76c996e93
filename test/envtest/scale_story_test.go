package envtest

// Scale story: many deployments against one local server, from creation to all Ready.
// `make bench` runs it at 1,000 and 5,000 deployments, `make bench-scale` at 10,000;
// BENCH_DEPLOYMENTS (a comma-separated list of counts, default "1000,5000") sets the sizes.
// Reported per size: seconds to all-Ready, milliseconds per object, reconciles/s, API writes per
// object, test-process RSS.

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/mcptest"
)

func BenchmarkStoryActivateDeployments(b *testing.B) {
	sizes, err := benchSizes(os.Getenv("BENCH_DEPLOYMENTS"))
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("deployments=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				runActivationScale(b, n)
			}
		})
	}
}

// benchSizes parses BENCH_DEPLOYMENTS: comma-separated positive counts; empty means 1000,5000.
func benchSizes(v string) ([]int, error) {
	if strings.TrimSpace(v) == "" {
		return []int{1000, 5000}, nil
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("BENCH_DEPLOYMENTS=%q: want comma-separated positive counts", v)
		}
		out = append(out, n)
	}
	return out, nil
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
	// Eight creators, as several GitOps appliers would: one serial creator bounds the time to
	// all-Ready by its own round trips at 10,000 deployments, not by the manager.
	work := make(chan int)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				name := fmt.Sprintf("svc-%05d", i)
				doc := base.DeepCopy()
				doc.Service = apiv1.ServiceIdentity{Ref: name, ConnectionRef: name}
				if err := k8sClient.Create(context.Background(), inlineProfile(ns, name, doc)); err != nil {
					errs <- err
					return
				}
				if err := k8sClient.Create(context.Background(), newDeployment(ns, name, name, name, fmt.Sprintf("%s/%d", live.URL, i), doc, nil, "all")); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		select {
		case work <- i:
		case err := <-errs:
			b.Fatalf("create: %v", err)
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatalf("create: %v", err)
	default:
	}
	ready := 0
	// Each poll Lists every deployment: the interval grows with n.
	if !pollUntil(time.Duration(200+n/10)*time.Millisecond, 30*time.Minute, func() bool {
		var list apiv1.ServiceDeploymentList
		if err := k8sClient.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			b.Fatal(err)
		}
		ready = 0
		for i := range list.Items {
			if isReady(&list.Items[i]) {
				ready++
			}
		}
		return ready == n
	}) {
		b.Fatalf("%d of %d deployments Ready after 30 minutes", ready, n)
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
	b.ReportMetric(float64(elapsed.Milliseconds())/float64(n), "ms/object")
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
