package mcptest

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestMain(m *testing.M) {
	RunIfServer()
	os.Exit(m.Run())
}

// TestSampleHTTPServer runs the program as the quickstart does (--http ADDR --tools FILE) in both
// eras and lists its tools with a bare go-sdk client.
func TestSampleHTTPServer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tools.json")
	if err := os.WriteFile(path, []byte(`[{"name":"search_issues","description":"Search.","inputSchema":{"type":"object"}}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, era := range []string{"modern", "legacy"} {
		t.Run(era, func(t *testing.T) {
			argv := StdioArgv("--http", "127.0.0.1:0", "--era", era, "--tools", path)
			cmd := exec.CommandContext(context.Background(), argv[0], argv[1:]...)
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			line, err := bufio.NewReader(stderr).ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			i := strings.Index(line, "http://")
			if i < 0 || !strings.Contains(line, era) {
				t.Fatalf("startup line %q", line)
			}
			url := strings.TrimSpace(line[i:])
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(),
				&mcp.StreamableClientTransport{Endpoint: url, DisableStandaloneSSE: true}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			want := map[string]string{"modern": "2026-07-28", "legacy": "2025-11-25"}[era]
			if got := cs.InitializeResult().ProtocolVersion; got != want {
				t.Fatalf("protocol %s, want %s", got, want)
			}
			res, err := cs.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Tools) != 1 || res.Tools[0].Name != "search_issues" {
				t.Fatalf("tools = %+v", res.Tools)
			}
		})
	}
}
