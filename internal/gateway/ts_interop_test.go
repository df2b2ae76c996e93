package gateway

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/b10x/connector-mcp/internal/mcptest"
)

// runTS installs the pinned SDK (hack/ts-sdk.sh) and runs mcptest.TypeScriptAgent with node. Node and npm are
// required (CI installs them); their absence fails the test.
func runTS(t *testing.T, url, token, tool, args string) map[string]json.RawMessage {
	return mcptest.RunTypeScript(t, filepath.Join("..", ".."), mcptest.TypeScriptAgent, url, token, tool, args)
}

// TestTypeScriptClientInterop: the TypeScript SDK client (an independent implementation, era
// 2025-11-25) lists and calls through the per-deployment route; the twin without a token is
// refused.
func TestTypeScriptClientInterop(t *testing.T) {
	w := newWorld(t, mcptest.Modern, nil, "read_file")
	res := runTS(t, w.url+"/mcp/team-a/files", goodTok, "echo", `{"text":"from typescript"}`)
	if e, ok := res["error"]; ok {
		t.Fatalf("TypeScript client: %s", e)
	}
	var tools []struct {
		Name, Title string
	}
	if err := json.Unmarshal(res["tools"], &tools); err != nil || len(tools) != 5 || tools[1].Name != "echo" || tools[1].Title != "Reviewed echo" {
		t.Fatalf("tools = %s", res["tools"])
	}
	if !strings.Contains(string(res["result"]), `from typescript`) || !strings.Contains(string(res["version"]), "connector-mcp-gateway") {
		t.Fatalf("result = %s, server %s", res["result"], res["version"])
	}
	// Its tools/call has the common shape: answered below the go-sdk server.
	if n := testutil.ToFloat64(w.gw.cfg.Metrics.DirectCalls); n != 1 {
		t.Fatalf("direct calls = %v, want 1", n)
	}
	res = runTS(t, w.url+"/mcp/team-a/files", "", "echo", `{}`)
	if e := string(res["error"]); !strings.Contains(e, `refused: unauthenticated`) || strings.Contains(string(res["tools"]), "echo") {
		t.Fatalf("TypeScript client without a token: %s", e)
	}
}
