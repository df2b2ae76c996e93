package mcpclient

import (
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/b10x/connector-mcp/internal/mcptest"
)

// benchListing lists and freezes all tools with mcpclient (every page, the bounded capture below
// the SDK, strict scan of every frame, RFC 8785 digests, the ToolSnapshot) and, in the same
// iteration, lists them with a bare go-sdk client over the same kind of transport and era (the
// baseline: ClientSession.Tools over all pages). The order of the two alternates between
// iterations. It reports both per-listing wall times and their ratio, mcpclient / go-sdk, as
// "x-baseline", and the ratio of the process CPU time (user + system) spent in each as
// "x-baseline-cpu": on a shared, loaded machine wall time also counts waiting for a core, CPU time
// does not. "x-baseline-median" is the median of the per-iteration wall-time ratios (each
// iteration's freeze over the same iteration's go-sdk listing): a load spike on a shared machine
// skews one pair, not the estimate. For HTTP the in-process server's work is in all figures; a
// stdio server is a child process, in none.
func benchListing(b *testing.B, cfg ServerConfig, baseline mcp.Transport, era Era, want int) {
	ctx := context.Background()
	s, err := NewClient(nil).Connect(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if s.Era() != era {
		b.Fatalf("mcpclient negotiated %s, want %s", s.Era(), era)
	}
	bare := mcp.NewClient(&mcp.Implementation{Name: "bare", Version: "1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	var sopts *mcp.ClientSessionOptions
	if era == EraLegacy {
		sopts = &mcp.ClientSessionOptions{ProtocolVersion: string(EraLegacy)}
	}
	cs, err := bare.Connect(ctx, baseline, sopts)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	if got := cs.InitializeResult().ProtocolVersion; got != s.ProtocolVersion() {
		b.Fatalf("go-sdk negotiated %s, mcpclient %s", got, s.ProtocolVersion())
	}

	freeze := func() (time.Duration, time.Duration) {
		t0, c0 := time.Now(), cpuTime(b)
		snap, err := s.ListTools(ctx)
		d, c := time.Since(t0), cpuTime(b)-c0
		if err != nil || len(snap.Tools) != want {
			b.Fatalf("mcpclient: %v", err)
		}
		return d, c
	}
	list := func() (time.Duration, time.Duration) {
		t0, c0 := time.Now(), cpuTime(b)
		n := 0
		for _, err := range cs.Tools(ctx, nil) {
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		d, c := time.Since(t0), cpuTime(b)-c0
		if n != want {
			b.Fatalf("go-sdk listed %d tools, want %d", n, want)
		}
		return d, c
	}
	var ours, sdk, oursCPU, sdkCPU time.Duration
	var ratios []float64
	i := 0
	for b.Loop() {
		var od, oc, sd, sc time.Duration
		if i%2 == 0 {
			od, oc = freeze()
			sd, sc = list()
		} else {
			sd, sc = list()
			od, oc = freeze()
		}
		ours, oursCPU, sdk, sdkCPU = ours+od, oursCPU+oc, sdk+sd, sdkCPU+sc
		ratios = append(ratios, float64(od)/float64(sd))
		i++
	}
	slices.Sort(ratios)
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(i) }
	b.ReportMetric(per(ours), "mcpclient-ns/list")
	b.ReportMetric(per(sdk), "go-sdk-ns/list")
	b.ReportMetric(float64(ours)/float64(sdk), "x-baseline")
	b.ReportMetric(float64(oursCPU)/float64(sdkCPU), "x-baseline-cpu")
	b.ReportMetric(ratios[len(ratios)/2], "x-baseline-median")
}

// cpuTime is the CPU time (user + system) this process has used so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkListFreeze1000 lists and freezes 1,000 tools over stdio and Streamable HTTP, each in
// both eras (2026-07-28 and 2025-11-25), against the bare go-sdk listing of the same server as
// baseline in the same run: x-baseline is mcpclient time / go-sdk time.
func BenchmarkListFreeze1000(b *testing.B) {
	const n = 1000
	for _, era := range []mcptest.Era{mcptest.Modern, mcptest.Legacy} {
		want := EraModern
		if era == mcptest.Legacy {
			want = EraLegacy
		}
		b.Run("stdio-"+string(era), func(b *testing.B) {
			argv := mcptest.StdioArgv("--generate", "1000", "--era", string(era))
			bare := &mcp.CommandTransport{Command: exec.CommandContext(context.Background(), argv[0], argv[1:]...)}
			benchListing(b, ServerConfig{Stdio: &StdioServer{Argv: argv}}, bare, want, n)
		})
		b.Run("http-"+string(era), func(b *testing.B) {
			srv := mcptest.StartHTTP(mcptest.NewServer("bench", mcptest.GenerateTools(n)), era)
			defer srv.Close()
			bare := &mcp.StreamableClientTransport{Endpoint: srv.URL, DisableStandaloneSSE: true}
			benchListing(b, ServerConfig{HTTP: &HTTPServer{URL: srv.URL}}, bare, want, n)
		})
	}
}

// BenchmarkCallTool calls "echo" over Streamable HTTP in both eras, with a small result and a
// 16 KiB one, through mcpclient (Session.CallTool: the bounded capture below the SDK, the strict
// scan of the frame, the raw result returned as received) and through a bare go-sdk client
// (ClientSession.CallTool) against the same kind of loopback server. The in-process server's
// work is in both figures. Compare ns/op and B/op of the mcpclient and go-sdk sub-benchmarks.
func BenchmarkCallTool(b *testing.B) {
	ctx := context.Background()
	for _, era := range []mcptest.Era{mcptest.Modern, mcptest.Legacy} {
		for _, size := range []struct {
			name string
			text string
		}{{"small", "bench"}, {"16KiB", strings.Repeat("x", 16<<10)}} {
			args := json.RawMessage(`{"text":"` + size.text + `"}`)
			b.Run("http-"+string(era)+"/"+size.name+"/mcpclient", func(b *testing.B) {
				srv := mcptest.StartHTTP(mcptest.NewServer("bench", mcptest.DefaultTools()), era)
				defer srv.Close()
				s, err := NewClient(nil).Connect(ctx, ServerConfig{HTTP: &HTTPServer{URL: srv.URL}})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				if _, err := s.ListTools(ctx); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					raw, err := s.CallTool(ctx, "echo", args)
					if err != nil || len(raw) < len(size.text) {
						b.Fatalf("call: %v (%d bytes)", err, len(raw))
					}
				}
			})
			b.Run("http-"+string(era)+"/"+size.name+"/go-sdk", func(b *testing.B) {
				srv := mcptest.StartHTTP(mcptest.NewServer("bench", mcptest.DefaultTools()), era)
				defer srv.Close()
				var sopts *mcp.ClientSessionOptions
				if era == mcptest.Legacy {
					sopts = &mcp.ClientSessionOptions{ProtocolVersion: string(EraLegacy)}
				}
				bare := mcp.NewClient(&mcp.Implementation{Name: "bare", Version: "1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
				cs, err := bare.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL, DisableStandaloneSSE: true}, sopts)
				if err != nil {
					b.Fatal(err)
				}
				defer cs.Close()
				if _, err := cs.ListTools(ctx, nil); err != nil {
					b.Fatal(err)
				}
				params := &mcp.CallToolParams{Name: "echo", Arguments: args}
				b.ReportAllocs()
				for b.Loop() {
					if _, err := cs.CallTool(ctx, params); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
