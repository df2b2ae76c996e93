package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TypeScriptAgent is an agent written with the TypeScript SDK's Client: run as
// `node SCRIPT URL TOKEN TOOL ARGS`, it lists the tools of the Streamable HTTP endpoint URL and
// calls TOOL with the JSON object ARGS, TOKEN as its bearer (none when empty; "@PATH" reads it from
// the file PATH, as a Pod reads its projected token), and prints one JSON line {tools, result,
// version} or {error}. The gateway's interop test runs it on this machine, the e2e suite in a Pod.
const TypeScriptAgent = `
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
const [url, tokenArg, tool, args] = process.argv.slice(2);
const token = tokenArg && tokenArg.startsWith("@") ? readFileSync(tokenArg.slice(1), "utf8").trim() : tokenArg;
const headers = token ? { Authorization: "Bearer " + token } : {};
const client = new Client({ name: "ts-agent", version: "1.0.0" });
try {
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  const tools = (await client.listTools()).tools;
  const result = await client.callTool({ name: tool, arguments: JSON.parse(args) });
  console.log(JSON.stringify({ tools, result, version: client.getServerVersion() }));
} catch (e) {
  console.log(JSON.stringify({ error: String(e && e.message || e) }));
}
await client.close().catch(() => {});
`

// RunTypeScript runs an ES module script with node against the TypeScript SDK pinned by
// hack/ts-sdk.sh (root is the repository root), passing args, and decodes the one JSON object
// the script prints. Node and npm are required (CI installs them); their absence fails the test.
func RunTypeScript(t testing.TB, root, script string, args ...string) map[string]json.RawMessage {
	t.Helper()
	out, err := exec.CommandContext(context.Background(), "bash", filepath.Join(root, "hack", "ts-sdk.sh")).Output()
	if err != nil {
		t.Fatalf("hack/ts-sdk.sh (needs npm): %v", err)
	}
	modules := strings.TrimSpace(string(out))
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is required for the TypeScript interop tests")
	}
	// ESM resolves packages from the script's directory: put the script beside node_modules.
	f, err := os.CreateTemp(filepath.Dir(modules), "interop-*.mjs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(f.Name()) })
	if _, err := f.WriteString(script); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, node, append([]string{f.Name()}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.String())
	}
	var res map[string]json.RawMessage
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("node output %q: %v", stdout.String(), err)
	}
	return res
}
