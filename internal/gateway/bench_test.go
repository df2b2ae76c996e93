package gateway

import (
	"context"
	"fmt"
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

// BenchmarkGatewayAddedLatency calls the same upstream tool directly (go-sdk client) and through
// the gateway, alternately, and reports p50 and p99 of both, the gateway's added p50 and p99, and
// their ratio. One op is one call of each.
func BenchmarkGatewayAddedLatency(b *testing.B) {
	w := benchWorld(b)
	// The gateway's upstream session is the surface's pooled one (reused): the comparison is a
	// warm direct session against a warm gateway path.
	gw := mustConnect(b, w.url+"/mcp/team-a/files", goodTok, "")
	direct := mustConnect(b, w.up.URL, "", "")
	ctx := context.Background()
	args := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "bench"}}
	for range 20 { // warm both paths and the caches
		if _, err := gw.CallTool(ctx, args); err != nil {
			b.Fatal(err)
		}
		if _, err := direct.CallTool(ctx, args); err != nil {
			b.Fatal(err)
		}
	}
	gwD, dD := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if _, err := direct.CallTool(ctx, args); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := gw.CallTool(ctx, args); err != nil {
			b.Fatal(err)
		}
		dD, gwD = append(dD, t1.Sub(t0)), append(gwD, time.Since(t1))
	}
	b.StopTimer()
	gp50, gp99, dp50, dp99 := percentile(gwD, 0.5), percentile(gwD, 0.99), percentile(dD, 0.5), percentile(dD, 0.99)
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	b.ReportMetric(us(dp50), "direct-p50-µs")
	b.ReportMetric(us(dp99), "direct-p99-µs")
	b.ReportMetric(us(gp50), "gateway-p50-µs")
	b.ReportMetric(us(gp99), "gateway-p99-µs")
	b.ReportMetric(us(gp50-dp50), "added-p50-µs")
	b.ReportMetric(us(gp99-dp99), "added-p99-µs")
	b.ReportMetric(float64(gp50)/float64(dp50), "p50-ratio")
}

// BenchmarkGatewayThroughput reports calls/s through the gateway at 1, 16 and 64 concurrent
// callers (each with its own session; one caller identity, warm caches).
func BenchmarkGatewayThroughput(b *testing.B) {
	for _, conc := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("callers=%d", conc), func(b *testing.B) {
			w := benchWorld(b)
			sessions := make([]*mcp.ClientSession, conc)
			for i := range sessions {
				sessions[i] = mustConnect(b, w.url+"/mcp/team-a/files", goodTok, "")
			}
			args := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "bench"}}
			if _, err := sessions[0].CallTool(context.Background(), args); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			errs := make(chan error, conc)
			for i := range conc {
				n := b.N / conc
				if i < b.N%conc {
					n++
				}
				wg.Add(1)
				go func(cs *mcp.ClientSession, n int) {
					defer wg.Done()
					for range n {
						if _, err := cs.CallTool(context.Background(), args); err != nil {
							errs <- err
							return
						}
					}
				}(sessions[i], n)
			}
			wg.Wait()
			b.StopTimer()
			close(errs)
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
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
