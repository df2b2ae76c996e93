package envtest

// Periodic re-verification story: N deployments (BENCH_REVERIFY_DEPLOYMENTS, comma-separated,
// default 1000) activated together by one manager process (cmd/manager, the chart's flags with
// --reverify-interval=BENCH_REVERIFY_INTERVAL, default 3m, --reverify-jitter=0.1 and
// --reverify-freezes-per-host-per-minute=30), then watched through their re-verifications at the
// MCP servers. One deployment in ten names one popular server; the rest are spread over
// servers of 20 deployments each (each its own loopback port, so its own upstream host).
//
// Every tools/list a server answers is a freeze: a path's first is its activation, the later
// ones are periodic re-verifications. Reported, and logged as time series in 10-second buckets
// from the bulk create (activations, periodic freezes of the popular server and of the others,
// all requests at the servers):
//
//   - the spread: within one interval (from half an interval after all-Ready) every other
//     deployment re-verifies once; the busiest and the quietest bucket as a multiple of the even
//     share (N/interval), and the same figure the old schedule (last + interval + jitter×interval×u)
//     would have given from the same activation times;
//   - the popular server's busiest minute of periodic freezes (at most the limit of 30);
//   - the most requests in flight at the servers at once (the story fails above --concurrency,
//     4 unless BENCH_MANAGER_ARGS sets another --concurrency=N);
//   - the servers' request rate, mean and busiest bucket.

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/b10x/connector-mcp/internal/mcptest"
)

// Shape of the re-verification story.
const (
	reverifyJitter        = 0.1
	reverifyHostLimit     = 30 // --reverify-freezes-per-host-per-minute
	reverifyPopularEvery  = 10 // deployment i names the popular server when i%10 == 0
	reverifyPerOtherHost  = 20 // deployments per other server
	reverifyBucket        = 10 * time.Second
	reverifyWorkers       = 4 // --concurrency, the chart's default
	reverifyDefaultPeriod = 3 * time.Minute
)

func BenchmarkStoryReverifySpread(b *testing.B) {
	sizes, err := benchSizes("BENCH_REVERIFY_DEPLOYMENTS", "1000")
	if err != nil {
		b.Fatal(err)
	}
	interval := reverifyDefaultPeriod
	if raw := os.Getenv("BENCH_REVERIFY_INTERVAL"); raw != "" {
		if interval, err = time.ParseDuration(raw); err != nil || interval < time.Minute {
			b.Fatalf("BENCH_REVERIFY_INTERVAL=%q: want a duration of at least 1m", raw)
		}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("deployments=%d/interval=%s", n, interval), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				runReverifySpread(b, n, interval)
			}
		})
	}
}

// freezeLog records what the story's MCP servers receive.
type freezeLog struct {
	mu       sync.Mutex
	requests []time.Time
	freezes  []seenFreeze
	inFlight atomic.Int64
	// maxInFlight is the most requests the servers were answering at once.
	maxInFlight atomic.Int64
}

// seenFreeze is one tools/list: when, on which path, and whether the popular server got it.
type seenFreeze struct {
	at      time.Time
	path    string
	popular bool
}

// serve wraps an MCP handler: every request counts, a POST whose body is a tools/list is a
// freeze.
func (l *freezeLog) serve(h http.Handler, popular bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := l.inFlight.Add(1)
		defer l.inFlight.Add(-1)
		for {
			m := l.maxInFlight.Load()
			if n <= m || l.maxInFlight.CompareAndSwap(m, n) {
				break
			}
		}
		now := time.Now()
		var body []byte
		if r.Method == http.MethodPost {
			body, _ = io.ReadAll(io.LimitReader(r.Body, 1<<20))
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		l.mu.Lock()
		l.requests = append(l.requests, now)
		if bytes.Contains(body, []byte(`"method":"tools/list"`)) {
			l.freezes = append(l.freezes, seenFreeze{at: now, path: r.URL.Path, popular: popular})
		}
		l.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (l *freezeLog) snapshot() ([]time.Time, []seenFreeze) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Time(nil), l.requests...), append([]seenFreeze(nil), l.freezes...)
}

func runReverifySpread(b *testing.B, n int, interval time.Duration) {
	ns := newNamespaceTB(b, "bench-reverify")
	_, h := modernServer(mcptest.DefaultTools())
	// The reviewed profile comes from a server outside the log.
	ref := startSwitchable(b, h)
	base := reviewedProfile(b, ref.URL)
	makeGrant(b, ns, "all")
	log := &freezeLog{}
	startServer := func(popular bool) string {
		ts := httptest.NewServer(log.serve(h, popular))
		b.Cleanup(ts.Close)
		return ts.URL
	}
	popular := startServer(true)
	others := make([]string, max(1, (n-n/reverifyPopularEvery)/reverifyPerOtherHost))
	for i := range others {
		others[i] = startServer(false)
	}
	urlOf := func(i int) string {
		if i%reverifyPopularEvery == 0 {
			return fmt.Sprintf("%s/mcp/%d", popular, i)
		}
		return fmt.Sprintf("%s/mcp/%d", others[i%len(others)], i)
	}
	track := trackNamespace(b, ns)
	args := append([]string{
		"--reverify-interval=" + interval.String(),
		fmt.Sprintf("--reverify-jitter=%g", reverifyJitter),
		fmt.Sprintf("--reverify-freezes-per-host-per-minute=%d", reverifyHostLimit),
		fmt.Sprintf("--concurrency=%d", reverifyWorkers),
	}, strings.Fields(os.Getenv("BENCH_MANAGER_ARGS"))...)
	workers, err := lastIntFlag(args, "--concurrency")
	if err != nil {
		b.Fatal(err)
	}
	startManagerProcess(b, ns, args...)
	b.Cleanup(func() { deleteScaleObjects(b, ns) })

	b.StartTimer()
	start := time.Now()
	if err := createScaleObjects(ns, urlOf, base, n, 1); err != nil {
		b.Fatalf("create: %v", err)
	}
	if !pollUntil(pollInterval, 30*time.Minute, func() bool { r, err := track.readyCount(); return err != nil || r == n }) {
		b.Fatalf("not every deployment Ready after 30 minutes")
	}
	allReady := time.Since(start)
	// One interval from half an interval after all-Ready: every other deployment's first
	// re-verification point has passed its earliest time, and its host's allowance, spent on
	// its activation, has come back.
	from := start.Add(allReady + interval/2)
	to := from.Add(interval)
	time.Sleep(time.Until(to.Add(reverifyBucket)))
	b.StopTimer()

	requests, freezes := log.snapshot()
	f := judgeReverifySpread(start, from, to, interval, requests, freezes)
	b.Logf("%d deployments (%d on the popular server, %d other servers), interval %s: all Ready after %.1f s; in the interval from %.0f s, %d periodic freezes of the others (even share %.1f per %s): busiest bucket %.2f×, quietest %.2f× the even share (the old schedule, from the same activations: busiest %.2f×); popular server's busiest minute %d periodic freezes (limit %d); at most %d requests in flight (--concurrency %d); servers' requests %.1f/s, busiest bucket %.1f/s",
		n, (n+reverifyPopularEvery-1)/reverifyPopularEvery, len(others), interval, allReady.Seconds(), from.Sub(start).Seconds(), f.otherPeriodic, f.even, reverifyBucket,
		f.peak, f.quiet, f.oldPeak, f.popularBusiestMinute, reverifyHostLimit, log.maxInFlight.Load(), workers, f.requestRate, f.requestPeak)
	// Benchmark logs keep their first lines only: the series are one line each, after the summary.
	for _, line := range f.series {
		b.Log(line)
	}
	b.ReportMetric(allReady.Seconds(), "s-to-all-ready")
	b.ReportMetric(float64(f.otherPeriodic)/interval.Seconds(), "periodic-freezes/s")
	b.ReportMetric(f.peak, "x-busiest-bucket-vs-even")
	b.ReportMetric(f.quiet, "x-quietest-bucket-vs-even")
	b.ReportMetric(f.oldPeak, "x-busiest-bucket-vs-even-old-schedule")
	b.ReportMetric(float64(f.popularBusiestMinute), "popular-host-freezes/busiest-min")
	b.ReportMetric(float64(log.maxInFlight.Load()), "max-requests-in-flight")
	b.ReportMetric(f.requestRate, "upstream-requests/s")
	b.ReportMetric(f.requestPeak, "upstream-requests/s-busiest-bucket")
	b.ReportMetric(float64(f.missing), "others-not-reverified-in-interval")
	// A freeze sends its requests one after another, so the servers never answer more at once
	// than the manager has freezes in flight.
	if n := log.maxInFlight.Load(); n > int64(workers) {
		b.Errorf("the servers answered %d requests at once, more than --concurrency=%d freezes", n, workers)
	}
	// A deployment whose point falls at the window's end and waits for its host's next slot can
	// miss it; more than one in fifty is a schedule that does not re-verify each once an interval.
	if f.missing*50 > len(others)*reverifyPerOtherHost {
		b.Errorf("%d other deployments were not re-verified in the interval from %.0f s", f.missing, from.Sub(start).Seconds())
	}
}

// spreadFigures is what judgeReverifySpread finds.
type spreadFigures struct {
	series []string
	// otherPeriodic counts the other servers' periodic freezes within [from, to); missing, the
	// other deployments with none there.
	otherPeriodic, missing int
	// even is the even share per bucket; peak, quiet and oldPeak are multiples of it.
	even, peak, quiet, oldPeak float64
	popularBusiestMinute       int
	requestRate, requestPeak   float64
}

// judgeReverifySpread turns the servers' log into the story's figures.
func judgeReverifySpread(start, from, to time.Time, interval time.Duration, requests []time.Time, freezes []seenFreeze) spreadFigures {
	sort.Slice(freezes, func(i, j int) bool { return freezes[i].at.Before(freezes[j].at) })
	sort.Slice(requests, func(i, j int) bool { return requests[i].Before(requests[j]) })
	// The series runs to the end of the interval; what came later lands in one last row that is
	// not printed.
	buckets := int((to.Sub(start) + reverifyBucket - 1) / reverifyBucket)
	type row struct{ activations, popular, others, requests int }
	rows := make([]row, buckets+1)
	bucket := func(t time.Time) int { return min(buckets, max(0, int(t.Sub(start)/reverifyBucket))) }
	activated := map[string]time.Time{}
	otherPaths := map[string]bool{}
	var f spreadFigures
	windowCount := make([]int, int(interval/reverifyBucket))
	var popularTimes []time.Time
	for _, fr := range freezes {
		r := &rows[bucket(fr.at)]
		if _, seen := activated[fr.path]; !seen {
			activated[fr.path] = fr.at
			r.activations++
			if !fr.popular {
				otherPaths[fr.path] = false
			}
			continue
		}
		if fr.popular {
			r.popular++
			popularTimes = append(popularTimes, fr.at)
			continue
		}
		r.others++
		if !fr.at.Before(from) && fr.at.Before(to) {
			f.otherPeriodic++
			otherPaths[fr.path] = true
			windowCount[min(len(windowCount)-1, int(fr.at.Sub(from)/reverifyBucket))]++
		}
	}
	for _, t := range requests {
		rows[bucket(t)].requests++
	}
	for _, ok := range otherPaths {
		if !ok {
			f.missing++
		}
	}
	f.even = float64(len(otherPaths)) * float64(reverifyBucket) / float64(interval)
	f.peak, f.quiet = peakAndQuiet(windowCount, f.even)
	// The old schedule from the same activation times: last + interval + jitter×interval×u, u
	// from a hash of the path (as it was from the UID).
	old := map[int]int{}
	for p, at := range activated {
		if _, other := otherPaths[p]; !other {
			continue
		}
		h := sha256.Sum256([]byte(p))
		u := float64(binary.BigEndian.Uint64(h[:8])) / (float64(^uint64(0)) + 1)
		next := at.Add(interval + time.Duration(reverifyJitter*u*float64(interval)))
		old[int(next.Sub(start)/reverifyBucket)]++
	}
	for _, c := range old {
		if f.even > 0 {
			f.oldPeak = max(f.oldPeak, float64(c)/f.even)
		}
	}
	for i, t := range popularTimes {
		j := sort.Search(len(popularTimes), func(k int) bool { return !popularTimes[k].Before(t.Add(time.Minute)) })
		f.popularBusiestMinute = max(f.popularBusiestMinute, j-i)
	}
	var inWindow, peakBucket int
	for _, t := range requests {
		if !t.Before(from) && t.Before(to) {
			inWindow++
		}
	}
	series := map[string]*strings.Builder{}
	names := []string{"activations", "periodic freezes, popular server", "periodic freezes, other servers", "requests at the servers"}
	for _, name := range names {
		series[name] = &strings.Builder{}
		fmt.Fprintf(series[name], "%s per %s from the bulk create:", name, reverifyBucket)
	}
	for _, r := range rows[:buckets] {
		peakBucket = max(peakBucket, r.requests)
		for i, v := range []int{r.activations, r.popular, r.others, r.requests} {
			fmt.Fprintf(series[names[i]], " %d", v)
		}
	}
	for _, name := range names {
		f.series = append(f.series, series[name].String())
	}
	f.requestRate = float64(inWindow) / to.Sub(from).Seconds()
	f.requestPeak = float64(peakBucket) / reverifyBucket.Seconds()
	return f
}

// peakAndQuiet are the largest and the smallest of counts as multiples of even.
func peakAndQuiet(counts []int, even float64) (peak, quiet float64) {
	if even <= 0 || len(counts) == 0 {
		return 0, 0
	}
	hi, lo := counts[0], counts[0]
	for _, c := range counts {
		hi, lo = max(hi, c), min(lo, c)
	}
	return float64(hi) / even, float64(lo) / even
}

// lastIntFlag is the value of the last "name=N" in args (the one a flag parser keeps).
func lastIntFlag(args []string, name string) (int, error) {
	v := ""
	for _, a := range args {
		if rest, ok := strings.CutPrefix(a, name+"="); ok {
			v = rest
		}
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%s: want %s=N among the manager's flags", name, name)
	}
	return n, nil
}
