// Package mcptest provides real MCP test servers for the project's tests, built on go-sdk v1.8.0:
// modern (stateless, 2026-07-28) and legacy (stateful, 2025-11-25) Streamable HTTP servers with
// configurable and run-time-changeable tool sets, stdio servers (answering, ignoring or exiting on
// server/discover, legacy-only) run as child processes of the test binary, and a raw JSON-RPC
// engine for hostile behaviour (oversize frames, endless pagination, duplicate keys,
// server-to-client requests, multi-round results, ...).
//
// Stdio servers run by re-executing the test binary: call RunIfServer first thing in TestMain, and
// use StdioArgv to build the argv of a server. The same program is the standalone
// cmd/mcptest-server (also the quickstart's sample server).
package mcptest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultTools returns a small tool set: "echo" (returns its arguments as text), "add" (sums a and
// b), "fail" (returns isError) and "read_file" (read-only annotated; returns a fixed text).
func DefaultTools() []*mcp.Tool {
	obj := func(props string) json.RawMessage {
		return json.RawMessage(`{"type":"object","properties":` + props + `}`)
	}
	ro := true
	return []*mcp.Tool{
		{Name: "echo", Description: "Echo the arguments back as text.", InputSchema: obj(`{"text":{"type":"string"}}`)},
		{Name: "add", Description: "Add two numbers.", InputSchema: obj(`{"a":{"type":"number"},"b":{"type":"number"}}`)},
		{Name: "fail", Description: "Always fails with isError.", InputSchema: obj(`{}`)},
		{Name: "read_file", Title: "Read file", Description: "Read a file.", InputSchema: obj(`{"path":{"type":"string"}}`),
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: ro}},
	}
}

// GenerateTools returns n tools named tool-0000.. with small distinct schemas (for benchmarks and
// bound tests).
func GenerateTools(n int) []*mcp.Tool {
	out := make([]*mcp.Tool, n)
	for i := range out {
		out[i] = &mcp.Tool{
			Name:        fmt.Sprintf("tool-%04d", i),
			Description: fmt.Sprintf("Generated tool number %d.", i),
			InputSchema: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"p%d":{"type":"string"}}}`, i)),
		}
	}
	return out
}

// LoadTools reads a JSON array of tool descriptors (MCP Tool objects) from path.
func LoadTools(path string) ([]*mcp.Tool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var tools []*mcp.Tool
	if err := json.Unmarshal(b, &tools); err != nil {
		return nil, fmt.Errorf("mcptest: %s: %w", path, err)
	}
	for _, t := range tools {
		if t.InputSchema == nil {
			t.InputSchema = json.RawMessage(`{"type":"object"}`)
		}
	}
	return tools, nil
}

// LoadRawTools reads a JSON array of raw tool descriptors from path, kept byte for byte.
func LoadRawTools(path string) ([]json.RawMessage, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var tools []json.RawMessage
	if err := json.Unmarshal(b, &tools); err != nil {
		return nil, fmt.Errorf("mcptest: %s: %w", path, err)
	}
	return tools, nil
}

// NewServer returns a go-sdk server named name with tools. Every tool answers with the generic
// handler: "fail" returns isError, "add" sums a and b, anything else echoes its raw arguments as a
// text content block.
func NewServer(name string, tools []*mcp.Tool) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: name, Version: "1.0.0"}, &mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}})
	for _, t := range tools {
		srv.AddTool(t, Handler)
	}
	return srv
}

// SetTool adds or replaces a tool on srv; the SDK sends notifications/tools/list_changed to
// connected sessions.
func SetTool(srv *mcp.Server, t *mcp.Tool) { srv.AddTool(t, Handler) }

// Handler is the generic tool handler of NewServer.
func Handler(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args := "{}"
	if raw := req.Params.Arguments; len(raw) > 0 {
		args = string(raw)
	}
	switch {
	case req.Params.Name == "fail":
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "failed as asked"}}}, nil
	case req.Params.Name == "add":
		var in struct{ A, B float64 }
		_ = json.Unmarshal([]byte(args), &in)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(in.A + in.B)}}}, nil
	case strings.HasPrefix(req.Params.Name, "read_file"):
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "file contents"}}}, nil
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: args}}}, nil
}
