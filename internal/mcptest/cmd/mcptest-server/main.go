// Command mcptest-server is the project's MCP test and sample server: go-sdk servers over stdio or
// Streamable HTTP in either protocol era, and a raw engine with hostile behaviours. See
// mcptest.Main for the flags. Quickstart:
//
//	go run ./internal/mcptest/cmd/mcptest-server --http 127.0.0.1:8931 --tools tools.json
package main

import (
	"os"

	"github.com/b10x/connector-mcp/internal/mcptest"
)

func main() {
	os.Exit(mcptest.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
