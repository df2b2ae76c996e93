package gateway

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"runtime"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/b10x/connector-mcp/internal/invocation"
	"github.com/b10x/connector-mcp/internal/mcptest"
)

// benchWorld is a gateway in front of a modern loopback upstream whose caches are warm: the
// TokenAuthenticator (over a TokenReview answerer) and the CachingAuthorizer answer from memory.
func benchWorld(b *testing.B) *world {
	b.Helper()
	api := &reviewAPI{tokens: map[string][]string{goodTok: {"connector-mcp"}}}
	w := newWorld(b, mcptest.Modern, func(c *Config) {
		c.Authenticator = &TokenAuthenticator{Client: api.client()}
		c.MaxInflight, c.MaxInflightPerCaller = 1024, 1024
	})
	return w
}

func percentile(d []time.Duration, p float64) time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

// hopProxy is the floor of any gateway: a bare reverse proxy (net/http/httputil, pooled
// connections, no authentication, no policy) in front of upstream, on loopback.
func hopProxy(b *testing.B, upstream string) string {
	b.Helper()
	target, err := url.Parse(upstream)
	if err != nil {
		b.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 256}
	rp.ErrorLog = log.New(io.Discard, "", 0)
	srv := httptest.NewServer(rp)
	b.Cleanup(srv.Close)
	return srv.URL + target.Path
}

// benchPaths are the three ways one caller reaches the same upstream tool in the gateway
// benchmarks: directly, through a bare reverse proxy (one loopback hop, nothing else), and
// through the gateway; each a warm go-sdk session.
type benchPaths struct {
	w                     *world
	direct, proxy, gw     func() *mcp.ClientSession
	directURL, proxyURL   string
	gatewayURL, gatewayTk string
}

func newBenchPaths(b *testing.B) *benchPaths {
	w := benchWorld(b)
	p := &benchPaths{w: w, directURL: w.up.URL, proxyURL: hopProxy(b, w.up.URL), gatewayURL: w.url + "/mcp/team-a/files", gatewayTk: goodTok}
	p.direct = func() *mcp.ClientSession { return mustConnect(b, p.directURL, "", "") }
	p.proxy = func() *mcp.ClientSession { return mustConnect(b, p.proxyURL, "", "") }
	p.gw = func() *mcp.ClientSession { return mustConnect(b, p.gatewayURL, p.gatewayTk, "") }
	return p
}

var benchArgs = &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "bench"}}

// allocsPerCall is the mean number of heap allocations of the whole process (client, gateway and
// upstream alike) per call of cs over n calls.
func allocsPerCall(b *testing.B, cs *mcp.ClientSession, n int) float64 {
	b.Helper()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		if _, err := cs.CallTool(context.Background(), benchArgs); err != nil {
			b.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / float64(n)
}

// BenchmarkGatewayAddedLatency calls the same upstream tool directly (go-sdk client), through a
// bare reverse proxy (the one-hop floor) and through the gateway, in turn, and reports p50 and
// p99 of each, the gateway's added p50 and p99, its ratios to the direct call and to the bare
// hop, and the allocations the gateway adds per call (measured after the timed loop). One op is
// one call of each.
func BenchmarkGatewayAddedLatency(b *testing.B) {
	p := newBenchPaths(b)
	// The gateway's upstream session is the surface's pooled one (reused): the comparison is a
	// warm direct session against a warm gateway path.
	gw, direct, proxy := p.gw(), p.direct(), p.proxy()
	ctx := context.Background()
	for range 20 { // warm the paths and the caches
		for _, cs := range []*mcp.ClientSession{gw, direct, proxy} {
			if _, err := cs.CallTool(ctx, benchArgs); err != nil {
				b.Fatal(err)
			}
		}
	}
	gwD, dD, hD := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if _, err := direct.CallTool(ctx, benchArgs); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := proxy.CallTool(ctx, benchArgs); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if _, err := gw.CallTool(ctx, benchArgs); err != nil {
			b.Fatal(err)
		}
		dD, hD, gwD = append(dD, t1.Sub(t0)), append(hD, t2.Sub(t1)), append(gwD, time.Since(t2))
	}
	b.StopTimer()
	gp50, gp99, dp50, dp99 := percentile(gwD, 0.5), percentile(gwD, 0.99), percentile(dD, 0.5), percentile(dD, 0.99)
	hp50, hp99 := percentile(hD, 0.5), percentile(hD, 0.99)
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	b.ReportMetric(us(dp50), "direct-p50-µs")
	b.ReportMetric(us(dp99), "direct-p99-µs")
	b.ReportMetric(us(hp50), "hop-p50-µs")
	b.ReportMetric(us(hp99), "hop-p99-µs")
	b.ReportMetric(us(gp50), "gateway-p50-µs")
	b.ReportMetric(us(gp99), "gateway-p99-µs")
	b.ReportMetric(us(gp50-dp50), "added-p50-µs")
	b.ReportMetric(us(gp99-dp99), "added-p99-µs")
	b.ReportMetric(float64(gp50)/float64(dp50), "p50-ratio")
	b.ReportMetric(float64(gp99)/float64(dp99), "p99-ratio")
	b.ReportMetric(float64(hp50)/float64(dp50), "hop-p50-ratio")
	b.ReportMetric(float64(gp50)/float64(hp50), "p50-ratio-to-hop")
	b.ReportMetric(allocsPerCall(b, gw, 500)-allocsPerCall(b, direct, 500), "added-allocs/call")
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// callsPerSecond runs n calls spread over the sessions, all at once, and returns calls/s.
func callsPerSecond(b *testing.B, sessions []*mcp.ClientSession, n int) float64 {
	b.Helper()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, len(sessions))
	for i, cs := range sessions {
		k := n / len(sessions)
		if i < n%len(sessions) {
			k++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range k {
				if _, err := cs.CallTool(context.Background(), benchArgs); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	return float64(n) / time.Since(start).Seconds()
}

// BenchmarkGatewayThroughput reports calls/s directly and through the gateway at 1, 16 and 64
// concurrent callers (each with its own session; one caller identity, warm caches), and their
// ratio. One op is one call of each, in ten alternating rounds of direct and gateway calls.
func BenchmarkGatewayThroughput(b *testing.B) {
	for _, conc := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("callers=%d", conc), func(b *testing.B) {
			p := newBenchPaths(b)
			direct, gw := make([]*mcp.ClientSession, conc), make([]*mcp.ClientSession, conc)
			for i := range conc {
				direct[i], gw[i] = p.direct(), p.gw()
			}
			callsPerSecond(b, direct, conc) // warm
			callsPerSecond(b, gw, conc)
			// Ten alternating rounds: a drift of the machine's load weighs on both paths alike.
			const rounds = 10
			var dTime, gTime float64
			b.ResetTimer()
			for r := range rounds {
				n := b.N/rounds + btoi(r < b.N%rounds)
				dTime += float64(n) / callsPerSecond(b, direct, n)
				gTime += float64(n) / callsPerSecond(b, gw, n)
			}
			b.StopTimer()
			d, g := float64(b.N)/dTime, float64(b.N)/gTime
			b.ReportMetric(d, "direct-calls/s")
			b.ReportMetric(g, "gateway-calls/s")
			b.ReportMetric(g/d, "throughput-ratio")
		})
	}
}

// BenchmarkGatewaySurfaceMemory reports the heap held by 1,000 served surfaces (each with its
// own verified document of 6 operations, as the registry keeps them).
func BenchmarkGatewaySurfaceMemory(b *testing.B) {
	up := startUpstream(b, mcptest.Modern)
	doc := reviewed(b, up.URL)
	opts := invocation.Options{Connector: invocation.ConnectorFunc(func(context.Context, invocation.Endpoint) (invocation.Session, error) {
		return nil, fmt.Errorf("not connected in this benchmark")
	}), Authorizer: agentOnly, Schemas: invocation.NewSchemaCache()}
	var perThousand float64
	for range b.N {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		reg := &Registry{Surface: opts, Log: logr.Discard()}
		for i := range 1000 {
			d := doc.DeepCopy()
			dep := activeDeployment(d, up.URL)
			dep.Name = fmt.Sprintf("files-%04d", i)
			s, err := invocation.NewSurface(d, dep, opts)
			if err != nil {
				b.Fatal(err)
			}
			reg.put(keyOf(dep.Namespace, dep.Name), s, "k")
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perThousand = float64(after.HeapAlloc) - float64(before.HeapAlloc)
		runtime.KeepAlive(reg)
		if reg.Len() != 1000 {
			b.Fatalf("registry holds %d surfaces", reg.Len())
		}
	}
	b.ReportMetric(perThousand/1024, "KiB/1000-surfaces")
}

// BenchmarkSearchOperationsNamespaced measures one search_operations call of a caller granted in
// one namespace (team-a, 10 deployments) with 100 and with 10,000 deployments served in all, with
// no decision cache (every decision is a SubjectAccessReview): with the namespace filter the cost
// and the reviews stay those of team-a; without it the search stops at --max-search-reviews and
// says partial. Reported, not asserted.
func BenchmarkSearchOperationsNamespaced(b *testing.B) {
	for _, total := range []int{100, 10000} {
		for _, scope := range []string{testNS, ""} {
			name := fmt.Sprintf("deployments=%d/namespace=%s", total, map[string]string{testNS: testNS, "": "all"}[scope])
			b.Run(name, func(b *testing.B) {
				w, sar := searchWorld(b, 10, total-10, func(c *Config) {})
				w.gw.cfg.Authorizer.(*CachingAuthorizer).TTL = -1
				caller := invocation.Caller{User: "system:serviceaccount:team-a:agent", UID: "uid-agent", Seed: "uid:uid-agent"}
				ctx := context.Background()
				sar.n.Store(0)
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if _, err := w.gw.search(ctx, caller, "echo", scope); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(sar.n.Load())/float64(b.N), "reviews/op")
			})
		}
	}
}
