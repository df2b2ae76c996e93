// Command conformance is the client under test for the official MCP conformance suite
// (@modelcontextprotocol/conformance, run by hack/conformance.sh). The suite starts a test server
// per scenario and runs this program with the server URL as its only argument and the scenario
// in MCP_CONFORMANCE_SCENARIO (context in MCP_CONFORMANCE_CONTEXT).
//
// Every scenario drives mcpclient, the project's tools-only client, exactly as consumers use it:
// Connect, ListTools (a snapshot of raw descriptors), CallTool (raw results). Scenarios that need a
// refused feature (elicitation, multi-round results) fail by design and are listed as expected
// failures in hack/conformance.sh.
//
// Handlers register in init functions, one file per family (auth scenarios in auth*.go).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/b10x/connector-mcp/mcpclient"
)

// scenario runs one conformance scenario against the server at url.
type scenario func(ctx context.Context, url string, conf map[string]any) error

var scenarios = map[string]scenario{}

// register adds a scenario handler; called from init functions.
func register(name string, s scenario) {
	if _, dup := scenarios[name]; dup {
		panic("conformance: scenario registered twice: " + name)
	}
	scenarios[name] = s
}

func main() {
	if len(os.Args) != 2 {
		fail("usage: conformance SERVER_URL (with MCP_CONFORMANCE_SCENARIO set)")
	}
	name := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	s, ok := scenarios[name]
	if !ok {
		names := make([]string, 0, len(scenarios))
		for n := range scenarios {
			names = append(names, n)
		}
		sort.Strings(names)
		fail(fmt.Sprintf("unknown scenario %q; known: %s", name, strings.Join(names, ", ")))
	}
	var conf map[string]any
	if c := os.Getenv("MCP_CONFORMANCE_CONTEXT"); c != "" {
		_ = json.Unmarshal([]byte(c), &conf)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := s(ctx, os.Args[1], conf); err != nil {
		fail(fmt.Sprintf("scenario %s: %v", name, err))
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "conformance:", msg)
	os.Exit(1)
}

// client is shared so that the era negotiated once is reused, as in the operator.
var client = mcpclient.NewClient(&mcpclient.Options{Name: "connector-mcp-conformance", Version: "v0.1"})

// connect opens a session to the scenario server (loopback http).
func connect(ctx context.Context, url string) (*mcpclient.Session, error) {
	return client.Connect(ctx, mcpclient.ServerConfig{HTTP: &mcpclient.HTTPServer{URL: url}})
}
