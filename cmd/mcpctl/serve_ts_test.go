package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/b10x/connector-mcp/internal/mcptest"
)

// tsServeClient lists the tools of "mcpctl serve" and calls one with the TypeScript SDK's Client,
// over Streamable HTTP ("http URL") or over stdio ("stdio CMD ARGS_JSON ENV_JSON"), printing one
// JSON line {tools, result} or {error}.
const tsServeClient = `
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
const [mode, target, extra, env, tool, args] = process.argv.slice(2);
const client = new Client({ name: "ts-agent", version: "1.0.0" });
try {
  const transport = mode === "http"
    ? new StreamableHTTPClientTransport(new URL(target))
    : new StdioClientTransport({ command: target, args: JSON.parse(extra), env: JSON.parse(env), stderr: "ignore" });
  await client.connect(transport);
  const tools = (await client.listTools()).tools;
  const result = await client.callTool({ name: tool, arguments: JSON.parse(args) });
  console.log(JSON.stringify({ tools, result }));
} catch (e) {
  console.log(JSON.stringify({ error: String(e && e.message || e) }));
}
await client.close().catch(() => {});
`

// runTSServe installs the pinned SDK (hack/ts-sdk.sh, as the gateway's interop test) and runs
// tsServeClient with node. Node and npm are required; their absence fails the test.
func runTSServe(t *testing.T, argv ...string) map[string]json.RawMessage {
	return mcptest.RunTypeScript(t, filepath.Join("..", ".."), tsServeClient, argv...)
}

// checkTSResult: the TypeScript client saw the reviewed names and titles and the upstream's result.
func checkTSResult(t *testing.T, res map[string]json.RawMessage) {
	t.Helper()
	if e, ok := res["error"]; ok {
		t.Fatalf("TypeScript client: %s", e)
	}
	var tools []struct{ Name, Title, Description string }
	if err := json.Unmarshal(res["tools"], &tools); err != nil || len(tools) != 4 {
		t.Fatalf("tools = %s", res["tools"])
	}
	seen := map[string]string{}
	for _, tl := range tools {
		seen[tl.Name] = tl.Title
		if strings.Contains(tl.Description, "Echo") {
			t.Fatalf("server prose reached the agent: %s", res["tools"])
		}
	}
	if seen["say"] != "Say it" || seen["files.read"] != "Read a file" {
		t.Fatalf("tools = %s", res["tools"])
	}
	if !strings.Contains(string(res["result"]), `from typescript`) {
		t.Fatalf("result = %s", res["result"])
	}
}

// TestServeTypeScriptClient: the TypeScript SDK client (an independent implementation) lists and
// calls through serve over Streamable HTTP and over stdio.
func TestServeTypeScriptClient(t *testing.T) {
	prof := reviewedDefaultProfile(t, t.TempDir(), nil)
	args := `{"text":"from typescript"}`
	t.Run("http", func(t *testing.T) {
		s := startServe(t, append([]string{"--listen", "127.0.0.1:0", "--profile", prof}, stdioArgs()...)...)
		url := waitFor(t, s.stderr, regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+/mcp)`))
		checkTSResult(t, runTSServe(t, "http", url, "[]", "{}", "say", args))
	})
	t.Run("stdio", func(t *testing.T) {
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		// The test binary runs as mcpctl (runMainEnv) and starts itself again as the upstream.
		argv, _ := json.Marshal(append([]string{"serve", "--profile", prof}, stdioArgs()...))
		env, _ := json.Marshal(map[string]string{runMainEnv: "1", "PATH": os.Getenv("PATH"), "HOME": t.TempDir()})
		checkTSResult(t, runTSServe(t, "stdio", exe, string(argv), string(env), "say", args))
	})
}
