package envtest

// Scale story: many deployments against one local server, from creation to all Ready, with the
// manager (cmd/manager, chart flags) in its own process. `make bench` runs it at 1,000 and 5,000
// deployments, `make bench-scale` at 10,000; BENCH_DEPLOYMENTS (a comma-separated list of
// counts, default "1000,5000") sets the sizes. BENCH_MANAGER_PPROF_DIR, when set, receives a CPU
// profile of the manager over the first BENCH_MANAGER_PPROF_SECONDS (default 30) of each size's
// run (manager-cpu-N.pprof), and its metrics and heap profile at all-Ready
// (manager-metrics-N.txt, manager-heap-N.pprof).
// BENCH_MANAGER_ARGS (space-separated) follow the chart's flags and --reverify-interval=1h (see
// scaleManagerArgs), e.g. "--concurrency=16".
//
// Reported per size: the baseline of the same run (seconds the same creators take to create the
// same objects with no manager running, and all-Ready as a multiple of it), seconds until every
// object exists and until every deployment is Ready,
// milliseconds per object, the manager's reconciles, API writes per object, and the manager
// process's RSS (at all-Ready and after a settle period), peak RSS and CPU seconds. Then: the
// create-to-Ready p50/p99 of 50 new deployments made one at a time with all the others Ready,
// as a multiple of the same 50 made before the bulk (an empty namespace); and a manager restart
// (SIGTERM, a new process): how long until it reconciled every deployment again, and the object
// writes, events and MCP server requests from the stop until a settle period later (all zero
// while no periodic re-verification is due).

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/controllers"
	"github.com/b10x/connector-mcp/internal/mcptest"
)

func BenchmarkStoryActivateDeployments(b *testing.B) {
	sizes, err := benchSizes("BENCH_DEPLOYMENTS", "1000,5000")
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

// BenchmarkStoryActivateDeploymentsSharded is the scale story with three manager processes on
// three label shards (--watch-label-selector, the chart's sharding.watchLabelSelector; objects
// labelled round-robin): the same baseline, creators and all-Ready as BenchmarkStoryActivateDeployments,
// to compare with the single manager's figure. BENCH_SHARDED_DEPLOYMENTS sets the sizes (default
// 1000,5000).
func BenchmarkStoryActivateDeploymentsSharded(b *testing.B) {
	sizes, err := benchSizes("BENCH_SHARDED_DEPLOYMENTS", "1000,5000")
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("deployments=%d/shards=3", n), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				runShardedActivationScale(b, n, 3)
			}
		})
	}
}

func runShardedActivationScale(b *testing.B, n, shards int) {
	ns := newNamespaceTB(b, "bench-shards")
	_, h := modernServer(mcptest.DefaultTools())
	live := startSwitchable(b, h)
	base := reviewedProfile(b, live.URL)
	makeGrant(b, ns, "all")
	bare := bareCreation(b, live.URL, base, n)
	track := trackNamespace(b, ns)
	managers := make([]*managerProcess, shards)
	for i := range managers {
		managers[i] = startManagerProcess(b, ns, append(strings.Fields(os.Getenv("BENCH_MANAGER_ARGS")),
			fmt.Sprintf("--watch-label-selector=%s in (shard%d)", controllers.ShardLabel, i+1))...)
	}
	b.Cleanup(func() { deleteScaleObjects(b, ns) })
	b.StartTimer()
	start := time.Now()
	if err := createScaleObjects(ns, pathsUnder(live.URL), base, n, shards); err != nil {
		b.Fatalf("create: %v", err)
	}
	created := time.Since(start)
	ready := 0
	var trackErr error
	if !pollUntil(pollInterval, 30*time.Minute, func() bool {
		ready, trackErr = track.readyCount()
		return trackErr != nil || ready == n
	}) {
		b.Fatalf("%d of %d deployments Ready after 30 minutes", ready, n)
	}
	if trackErr != nil {
		b.Fatal(trackErr)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	var rss float64
	for _, m := range managers {
		rss += float64(m.stats(b).RSSBytes) / (1 << 20)
	}
	b.Logf("%d deployments on %d shards: baseline all created after %.1f s; all created after %.1f s, all Ready after %.1f s (%.2f× the baseline); managers' RSS %.1f MiB in all",
		n, shards, bare.Seconds(), created.Seconds(), elapsed.Seconds(), elapsed.Seconds()/bare.Seconds(), rss)
	b.ReportMetric(bare.Seconds(), "s-to-all-created-bare")
	b.ReportMetric(elapsed.Seconds(), "s-to-all-ready")
	b.ReportMetric(elapsed.Seconds()/bare.Seconds(), "x-ready-vs-bare-created")
	b.ReportMetric(float64(track.modified())/float64(2*n), "writes/object")
	b.ReportMetric(rss, "managers-RSS-MiB")
}

// benchSizes reads the sizes a story runs at from the environment variable name:
// comma-separated positive counts; unset or empty means def.
func benchSizes(name, def string) ([]int, error) {
	v := os.Getenv(name)
	if strings.TrimSpace(v) == "" {
		v = def
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s=%q: want comma-separated positive counts", name, v)
		}
		out = append(out, n)
	}
	return out, nil
}

// scaleManagerArgs are the scale story's flags after the chart's: a re-verification interval of
// an hour, so that no deployment's first periodic re-verification (at least jitter × interval,
// 6 minutes, after its activation) falls into the story and the restart's figures count only
// what the restart itself costs; then BENCH_MANAGER_ARGS. BenchmarkStoryReverifySpread measures
// the periodic re-verification.
func scaleManagerArgs() []string {
	return append([]string{"--reverify-interval=1h"}, strings.Fields(os.Getenv("BENCH_MANAGER_ARGS"))...)
}

// settleAfterReady is how long the manager idles after all-Ready before its settled RSS is read.
const settleAfterReady = 30 * time.Second

func runActivationScale(b *testing.B, n int) {
	ns := newNamespaceTB(b, "bench")
	_, h := modernServer(mcptest.DefaultTools())
	live := startSwitchable(b, h)
	base := reviewedProfile(b, live.URL)
	makeGrant(b, ns, "all")
	bare := bareCreation(b, live.URL, base, n)
	track := trackNamespace(b, ns)
	mgr := startManagerProcess(b, ns, scaleManagerArgs()...)
	// Runs before the manager stops (cleanups run last-registered first): the next size starts
	// with a manager that caches none of this size's objects.
	b.Cleanup(func() { deleteScaleObjects(b, ns) })
	if dir := os.Getenv("BENCH_MANAGER_PPROF_DIR"); dir != "" {
		profiled := make(chan struct{})
		go func() {
			defer close(profiled)
			mgr.cpuProfile(filepath.Join(dir, fmt.Sprintf("manager-cpu-%d.pprof", n)), benchProfileSeconds(b))
		}()
		b.Cleanup(func() { <-profiled }) // before the manager stops
	}
	// New deployments on a cluster this manager serves nothing else of: the latency baseline
	// (after one that waits for the manager to lead).
	probeActivations(b, ns, live.URL, base, track, "probe-warm", 1)
	emptyProbes := probeActivations(b, ns, live.URL, base, track, "probe-empty", scaleProbes)
	before := mgr.counters(b)
	cpuBefore := mgr.stats(b).CPUSeconds
	writesBefore := track.modified()

	b.StartTimer()
	start := time.Now()
	if err := createScaleObjects(ns, pathsUnder(live.URL), base, n, 1); err != nil {
		b.Fatalf("create: %v", err)
	}
	created := time.Since(start)
	ready := 0
	var trackErr error
	exited := false
	// Reads the watches' tally (in memory), not the apiserver; a manager that exits ends the wait.
	if !pollUntil(pollInterval, 30*time.Minute, func() bool {
		ready, trackErr = track.readyCount()
		select {
		case <-mgr.exited:
			exited = true
		default:
		}
		return exited || trackErr != nil || ready == n+scaleProbes+1
	}) {
		b.Fatalf("%d of %d deployments Ready after 30 minutes", ready, n)
	}
	if trackErr != nil {
		b.Fatal(trackErr)
	}
	if exited && ready != n+scaleProbes+1 {
		b.Fatalf("the manager exited with %d of %d deployments Ready:\n%s", ready, n, mgr.logTail())
	}
	elapsed := time.Since(start)
	b.StopTimer()

	atReady := mgr.stats(b)
	counters := mgr.counters(b)
	if dir := os.Getenv("BENCH_MANAGER_PPROF_DIR"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("manager-metrics-%d.txt", n)), mgr.scrape(b), 0o600); err != nil { //nolint:gosec // BENCH_MANAGER_PPROF_DIR, the operator's own directory
			b.Fatal(err)
		}
		mgr.saveProfile(b, "heap", filepath.Join(dir, fmt.Sprintf("manager-heap-%d.pprof", n)))
	}
	writes := track.modified() - writesBefore
	time.Sleep(settleAfterReady)
	settled := mgr.stats(b)
	// The same new deployments while n others are served (settled).
	fullProbes := probeActivations(b, ns, live.URL, base, track, "probe-full", scaleProbes)
	restart := restartIdle(b, ns, mgr, live, track, n+2*scaleProbes+1)

	reconciles := counters.DeploymentReconciles - before.DeploymentReconciles
	b.Logf("%d deployments: baseline (no manager) all created after %.1f s; with the manager all created after %.1f s, all Ready after %.1f s (%.2f× the baseline); manager RSS %.1f MiB at all-Ready, %.1f MiB %s later, peak %.1f MiB, %.1f CPU s",
		n, bare.Seconds(), created.Seconds(), elapsed.Seconds(), elapsed.Seconds()/bare.Seconds(), float64(atReady.RSSBytes)/(1<<20), float64(settled.RSSBytes)/(1<<20), settleAfterReady,
		float64(settled.HWMBytes)/(1<<20), atReady.CPUSeconds-cpuBefore)
	b.ReportMetric(bare.Seconds(), "s-to-all-created-bare")
	b.ReportMetric(created.Seconds(), "s-to-all-created")
	b.ReportMetric(elapsed.Seconds()/bare.Seconds(), "x-ready-vs-bare-created")
	b.ReportMetric(elapsed.Seconds(), "s-to-all-ready")
	b.ReportMetric(float64(elapsed.Milliseconds())/float64(n), "ms/object")
	b.ReportMetric(reconciles/float64(n), "deployment-reconciles/object")
	b.ReportMetric(reconciles/elapsed.Seconds(), "deployment-reconciles/s")
	b.ReportMetric(float64(writes)/float64(2*n), "writes/object")
	b.ReportMetric((counters.WriteRequests-before.WriteRequests)/float64(2*n), "manager-write-requests/object")
	b.ReportMetric((counters.Requests-before.Requests)/float64(2*n), "manager-requests/object")
	b.ReportMetric(atReady.CPUSeconds-cpuBefore, "manager-cpu-s")
	b.ReportMetric(float64(atReady.RSSBytes)/(1<<20), "manager-RSS-MiB")
	b.ReportMetric(float64(settled.RSSBytes)/(1<<20), "manager-RSS-settled-MiB")
	b.ReportMetric(float64(settled.HWMBytes)/(1<<20), "manager-HWM-MiB")
	b.ReportMetric(float64(n), "deployments")
	ep50, ep99, fp50, fp99 := percentile(emptyProbes, 0.5), percentile(emptyProbes, 0.99), percentile(fullProbes, 0.5), percentile(fullProbes, 0.99)
	b.Logf("%d new deployments, one at a time, create to Ready: p50 %v p99 %v on an empty namespace, p50 %v p99 %v with %d others Ready", scaleProbes, ep50, ep99, fp50, fp99, n)
	b.ReportMetric(float64(fp50.Milliseconds()), "new-ready-p50-ms")
	b.ReportMetric(float64(fp99.Milliseconds()), "new-ready-p99-ms")
	b.ReportMetric(float64(fp50)/float64(ep50), "new-ready-p50-vs-empty")
	b.ReportMetric(float64(fp99)/float64(ep99), "new-ready-p99-vs-empty")
	b.Logf("manager restart with %d Ready: every deployment reconciled again after %.1f s; %d object writes, %d events, %d upstream requests (freezes) until %s later",
		n+2*scaleProbes+1, restart.reconciled.Seconds(), restart.writes, restart.events, restart.upstream, restart.window)
	b.ReportMetric(restart.reconciled.Seconds(), "restart-s-to-reconciled")
	b.ReportMetric(float64(restart.writes), "restart-object-writes")
	b.ReportMetric(float64(restart.events), "restart-events")
	b.ReportMetric(float64(restart.upstream), "restart-upstream-requests")
}

// scaleProbes is how many new deployments the scale story creates, one at a time, before the
// bulk creation (an empty namespace, after one warm-up) and after all-Ready (with the bulk
// served).
const scaleProbes = 50

// percentile is the p-quantile of d (sorted in place).
func percentile(d []time.Duration, p float64) time.Duration {
	slices.Sort(d)
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

// probeActivations creates count profile and deployment pairs named prefix-NN one at a time and
// returns each one's time from the profile's create to the deployment's Ready (seen on the
// tracker's watch).
func probeActivations(b *testing.B, ns, liveURL string, base *apiv1.ProfileDocument, track *nsTracker, prefix string, count int) []time.Duration {
	b.Helper()
	out := make([]time.Duration, 0, count)
	for i := range count {
		name := fmt.Sprintf("%s-%02d", prefix, i)
		doc := base.DeepCopy()
		doc.Service = apiv1.ServiceIdentity{Ref: name, ConnectionRef: name}
		start := time.Now()
		mustCreate(b, inlineProfile(ns, name, doc))
		mustCreate(b, newDeployment(ns, name, name, name, liveURL+"/"+name, doc, nil, "all"))
		if !pollUntil(5*time.Millisecond, 2*time.Minute, func() bool { return track.isReady(name) }) {
			b.Fatalf("%s not Ready within 2 minutes", name)
		}
		out = append(out, time.Since(start))
	}
	return out
}

// restartFigures is what a manager restart cost once every deployment was Ready.
type restartFigures struct {
	// reconciled is how long the new manager took to reconcile every deployment once.
	reconciled time.Duration
	// writes, events and upstream are the profiles' and deployments' updates, the events created
	// in the namespace and the requests the MCP server received, from the old manager's stop
	// until window after the new one reconciled everything.
	writes, events, upstream int64
	window                   time.Duration
}

// restartIdle stops mgr, starts another manager process with the same flags and counts what the
// restart writes and sends until a settle period after the new manager reconciled all n
// deployments (within the periodic re-verification interval, nothing is due).
func restartIdle(b *testing.B, ns string, mgr *managerProcess, live *switchable, track *nsTracker, n int) restartFigures {
	b.Helper()
	mgr.stop(b)
	events := func() int64 {
		l := &eventsv1.EventList{}
		if err := k8sClient.List(context.Background(), l, client.InNamespace(ns)); err != nil {
			b.Fatal(err)
		}
		var c int64
		for _, e := range l.Items {
			// The new manager's leader election records its own event on the Lease.
			if k := e.Regarding.Kind; k == "ServiceDeployment" || k == "McpServiceProfile" {
				c++
			}
		}
		return c
	}
	writes0, events0, hits0 := track.modified(), events(), live.hits.Load()
	start := time.Now()
	next := startManagerProcess(b, ns, scaleManagerArgs()...)
	if !pollUntil(pollInterval, 10*time.Minute, func() bool { return next.counters(b).DeploymentReconciles >= float64(n) }) {
		b.Fatalf("the restarted manager did not reconcile %d deployments within 10 minutes", n)
	}
	f := restartFigures{reconciled: time.Since(start), window: settleAfterReady}
	time.Sleep(f.window)
	f.writes, f.events, f.upstream = track.modified()-writes0, events()-events0, live.hits.Load()-hits0
	return f
}

// bareCreation is the baseline of the same run: the time the same creators take to create the
// same n profiles and deployments in a namespace no manager watches (the floor the control plane
// of this machine sets for all-Ready); the objects are deleted before the manager starts.
func bareCreation(b *testing.B, liveURL string, base *apiv1.ProfileDocument, n int) time.Duration {
	b.Helper()
	ns := newNamespaceTB(b, "bench-bare")
	start := time.Now()
	if err := createScaleObjects(ns, pathsUnder(liveURL), base, n, 1); err != nil {
		b.Fatalf("baseline create: %v", err)
	}
	took := time.Since(start)
	deleteScaleObjects(b, ns)
	return took
}

// createScaleObjects creates n profiles and their deployments in ns with eight creators, as
// several GitOps appliers would: one serial creator bounds the time to all-Ready by its own round
// trips at 10,000 deployments, not by the manager.
//
// Deployment i connects to urlOf(i). With shards > 1, object i carries the shard label
// shard<i mod shards + 1>.
func createScaleObjects(ns string, urlOf func(i int) string, base *apiv1.ProfileDocument, n, shards int) error {
	return createPairs(n, func(i int) error {
		name := fmt.Sprintf("svc-%05d", i)
		doc := base.DeepCopy()
		doc.Service = apiv1.ServiceIdentity{Ref: name, ConnectionRef: name}
		prof, sd := inlineProfile(ns, name, doc), newDeployment(ns, name, name, name, urlOf(i), doc, nil, "all")
		if shards > 1 {
			shard := fmt.Sprintf("shard%d", i%shards+1)
			prof, sd = sharded(prof, shard), sharded(sd, shard)
		}
		if err := k8sClient.Create(context.Background(), prof); err != nil {
			return err
		}
		return k8sClient.Create(context.Background(), sd)
	})
}

// pathsUnder names one path per deployment under a server's URL (base/i): distinct endpoints,
// one upstream host.
func pathsUnder(base string) func(i int) string {
	return func(i int) string { return fmt.Sprintf("%s/%d", base, i) }
}

// createPairs runs create(i) for i in [0, n) on eight creators and returns the first error (the
// creators stop taking work then).
func createPairs(n int, create func(i int) error) error {
	work := make(chan int)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := create(i); err != nil {
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
			close(work)
			wg.Wait()
			return err
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// benchProfileSeconds is BENCH_MANAGER_PPROF_SECONDS, the length of the manager's CPU profile
// from the start of creation (default 30).
func benchProfileSeconds(b testing.TB) int {
	v := os.Getenv("BENCH_MANAGER_PPROF_SECONDS")
	if v == "" {
		return 30
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("BENCH_MANAGER_PPROF_SECONDS=%q: want a positive number of seconds", v)
	}
	return n
}

// cpuProfile saves a CPU profile of the manager over the next seconds (or until it stops) to
// path; a failure is written to path+".err" instead.
func (p *managerProcess) cpuProfile(path string, seconds int) {
	fail := func(err error) {
		_ = os.WriteFile(path+".err", []byte(err.Error()+"\n"), 0o600) //nolint:gosec // a path under BENCH_MANAGER_PPROF_DIR
	}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, fmt.Sprintf("%sprofile?seconds=%d", p.pprofURL, seconds), nil)
	if err != nil {
		fail(err)
		return
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fail(err)
		return
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		fail(err)
		return
	}
	if err := os.WriteFile(path, data, 0o600); err != nil { //nolint:gosec // a path under BENCH_MANAGER_PPROF_DIR
		fail(err)
	}
}

// saveProfile saves the manager's pprof profile name (e.g. "heap") to path.
func (p *managerProcess) saveProfile(b testing.TB, name, path string) {
	b.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, p.pprofURL+name, nil)
	if err != nil {
		b.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatalf("manager %s profile: %v", name, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		b.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("manager %s profile: HTTP %d", name, resp.StatusCode)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil { //nolint:gosec // a path under BENCH_MANAGER_PPROF_DIR
		b.Fatal(err)
	}
}

// deleteScaleObjects deletes the deployments, profiles and events of ns and waits until the
// deployments and profiles are gone. A collection delete of 10,000 objects can outlast the
// apiserver's request timeout (or lose its stream) while the deletion goes on: a failed delete is
// retried; only objects still there after 10 minutes fail the benchmark.
func deleteScaleObjects(b testing.TB, ns string) {
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Minute)
	for {
		left := 0
		for _, l := range []client.ObjectList{&apiv1.ServiceDeploymentList{}, &apiv1.McpServiceProfileList{}} {
			if err := k8sClient.List(ctx, l, client.InNamespace(ns), client.Limit(1)); err != nil {
				b.Logf("list the story's objects: %v", err)
				left++
				continue
			}
			left += meta.LenList(l)
		}
		if left == 0 {
			_ = k8sClient.DeleteAllOf(ctx, &eventsv1.Event{}, client.InNamespace(ns))
			return
		}
		if time.Now().After(deadline) {
			b.Errorf("the story's objects in %s were not gone within 10 minutes", ns)
			return
		}
		for _, o := range []client.Object{&apiv1.ServiceDeployment{}, &apiv1.McpServiceProfile{}} {
			// An apiserver busy with 10,000 deletions times out or resets the stream; the
			// objects left over are what counts, so every error is retried until the deadline.
			if err := k8sClient.DeleteAllOf(ctx, o, client.InNamespace(ns)); err != nil {
				b.Logf("delete the story's %T: %v (retrying)", o, err)
			}
		}
		time.Sleep(2 * time.Second)
	}
}

// nsTracker follows the deployments and profiles of one namespace through watches: which
// deployments are Ready, and how many updates (watch MODIFIED events: status and metadata
// writes, whoever made them) the objects have had.
type nsTracker struct {
	mu    sync.Mutex
	ready map[string]bool
	mods  int64
	err   error
}

func (tr *nsTracker) readyCount() (int, error) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for _, r := range tr.ready {
		if r {
			n++
		}
	}
	return n, tr.err
}

// isReady reports whether deployment name was Ready at its last update seen.
func (tr *nsTracker) isReady(name string) bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.ready[name]
}

func (tr *nsTracker) modified() int64 {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.mods
}

// trackNamespace starts watching the deployments and profiles of ns (still empty) until the
// benchmark ends. A watch the apiserver closes is resumed from its last resource version; one
// that cannot be resumed (the version compacted) fails the tracker rather than miss updates.
func trackNamespace(b testing.TB, ns string) *nsTracker {
	b.Helper()
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	tr := &nsTracker{ready: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, l := range []client.ObjectList{&apiv1.ServiceDeploymentList{}, &apiv1.McpServiceProfileList{}} {
		if err := wc.List(ctx, l, client.InNamespace(ns)); err != nil {
			b.Fatal(err)
		}
		rv := l.GetResourceVersion()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				w, err := wc.Watch(ctx, l, &client.ListOptions{Namespace: ns, Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
				if err != nil {
					if ctx.Err() == nil {
						time.Sleep(200 * time.Millisecond)
					}
					continue
				}
				for ev := range w.ResultChan() {
					if ev.Type == watch.Error {
						tr.mu.Lock()
						tr.err = fmt.Errorf("watch of %T in %s failed: %v", l, ns, ev.Object)
						tr.mu.Unlock()
						w.Stop()
						return
					}
					o, ok := ev.Object.(client.Object)
					if !ok {
						continue
					}
					rv = o.GetResourceVersion()
					sd, isSD := o.(*apiv1.ServiceDeployment)
					tr.mu.Lock()
					if ev.Type == watch.Modified {
						tr.mods++
					}
					if isSD {
						switch ev.Type {
						case watch.Added, watch.Modified:
							tr.ready[sd.Name] = isReady(sd)
						case watch.Deleted:
							delete(tr.ready, sd.Name)
						}
					}
					tr.mu.Unlock()
				}
				w.Stop()
			}
		}()
	}
	b.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return tr
}
