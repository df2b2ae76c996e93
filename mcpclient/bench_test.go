package mcpclient

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/b10x/connector-mcp/internal/mcptest"
)

// benchListing lists and freezes all tools with mcpclient and, in the same iteration, lists them
// with a bare go-sdk client over the same kind of transport (the baseline). It reports both
// per-listing times and their ratio (mcpclient / go-sdk).
func benchListing(b *testing.B, cfg ServerConfig, baseline mcp.Transport, want int) {
	ctx := context.Background()
	s, err := NewClient(nil).Connect(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	bare := mcp.NewClient(&mcp.Implementation{Name: "bare", Version: "1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	cs, err := bare.Connect(ctx, baseline, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()

	var ours, sdk time.Duration
	for b.Loop() {
		t0 := time.Now()
		snap, err := s.ListTools(ctx)
		ours += time.Since(t0)
		if err != nil || len(snap.Tools) != want {
			b.Fatalf("mcpclient: %v (%d tools)", err, len(snap.Tools))
		}
		t0 = time.Now()
		n := 0
		for _, err := range cs.Tools(ctx, nil) {
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		sdk += time.Since(t0)
		if n != want {
			b.Fatalf("go-sdk listed %d tools", n)
		}
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) }
	b.ReportMetric(per(ours), "mcpclient-ns/list")
	b.ReportMetric(per(sdk), "go-sdk-ns/list")
	b.ReportMetric(float64(ours)/float64(sdk), "ratio")
}

// BenchmarkListFreeze1000 lists and freezes 1,000 tools over stdio and Streamable HTTP (modern
// and legacy), against the bare go-sdk client as baseline in the same run.
func BenchmarkListFreeze1000(b *testing.B) {
	const n = 1000
	b.Run("stdio", func(b *testing.B) {
		argv := mcptest.StdioArgv("--generate", "1000")
		benchListing(b, ServerConfig{Stdio: &StdioServer{Argv: argv}}, &mcp.CommandTransport{Command: exec.CommandContext(context.Background(), argv[0], argv[1:]...)}, n)
	})
	for _, era := range []mcptest.Era{mcptest.Modern, mcptest.Legacy} {
		b.Run("http-"+string(era), func(b *testing.B) {
			srv := mcptest.StartHTTP(mcptest.NewServer("bench", mcptest.GenerateTools(n)), era)
			defer srv.Close()
			benchListing(b, ServerConfig{HTTP: &HTTPServer{URL: srv.URL}}, &mcp.StreamableClientTransport{Endpoint: srv.URL, DisableStandaloneSSE: true}, n)
		})
	}
}
