package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/devcluster"
	"github.com/b10x/connector-mcp/ocipack"
	"github.com/b10x/connector-mcp/snapshot"
)

// everythingVersion is the npm release of @modelcontextprotocol/server-everything these tests
// run: the version hack/conformance.sh's interop check installs, into the same cache directory
// with the same stamp, so either installs it for the other.
const everythingVersion = "2026.8.31"

var everythingOnce struct {
	sync.Once
	path string
	err  string
}

// everythingServer returns the argv (after "--") that starts the npm server-everything over
// stdio, installing it with npm into the project's cache on first use
// ($CONNECTOR_MCP_CACHE/node, as hack/conformance.sh). Node and npm are required (CI installs
// them from Debian); their absence fails the test.
func everythingServer(t *testing.T) []string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is required for the server-everything tests")
	}
	everythingOnce.Do(func() {
		root, err := devcluster.CacheRoot()
		if err != nil {
			everythingOnce.err = err.Error()
			return
		}
		dir := filepath.Join(root, "node")
		index := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
		stamp := filepath.Join(dir, ".installed-everything-"+everythingVersion)
		if _, err := os.Stat(stamp); err == nil {
			if _, err := os.Stat(index); err == nil {
				everythingOnce.path = index
				return
			}
		}
		npm, err := exec.LookPath("npm")
		if err != nil {
			everythingOnce.err = "npm is required to install @modelcontextprotocol/server-everything"
			return
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			everythingOnce.err = err.Error()
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, npm, "install", "--silent", "--no-audit", "--no-fund", "--prefix", dir,
			"@modelcontextprotocol/server-everything@"+everythingVersion).CombinedOutput()
		if err != nil {
			everythingOnce.err = "npm install: " + err.Error() + "\n" + string(out)
			return
		}
		if err := os.WriteFile(stamp, nil, 0o644); err != nil {
			everythingOnce.err = err.Error()
			return
		}
		everythingOnce.path = index
	})
	if everythingOnce.err != "" {
		t.Fatal(everythingOnce.err)
	}
	return []string{"--", node, everythingOnce.path, "stdio"}
}

// everythingReview is the reviewed mapping of server-everything's tools: local names, titles,
// descriptions and effects that are not the server's.
var everythingReview = map[string]apiv1.OperationMapping{
	"echo":                           {OperationRef: "repeat", Title: "Repeat", Description: "Repeats a message back.", Effect: apiv1.EffectRead},
	"get-sum":                        {OperationRef: "math.add", Title: "Add two numbers", Description: "Adds a and b.", Effect: apiv1.EffectRead},
	"get-tiny-image":                 {OperationRef: "image.tiny", Title: "Tiny image", Description: "A small PNG.", Effect: apiv1.EffectRead},
	"get-annotated-message":          {OperationRef: "message.annotated", Title: "Annotated message", Effect: apiv1.EffectRead},
	"get-env":                        {OperationRef: "env.dump", Title: "Environment", Description: "Prints the server's environment.", Effect: apiv1.EffectRead},
	"get-resource-links":             {OperationRef: "resource.links", Title: "Resource links", Effect: apiv1.EffectRead},
	"get-resource-reference":         {OperationRef: "resource.reference", Title: "Resource reference", Effect: apiv1.EffectRead},
	"get-structured-content":         {OperationRef: "structured", Title: "Structured content", Effect: apiv1.EffectRead},
	"gzip-file-as-resource":          {OperationRef: "gzip.fetch", Title: "Fetch and gzip", Effect: apiv1.EffectWrite},
	"simulate-research-query":        {OperationRef: "research", Title: "Research", Effect: apiv1.EffectRead},
	"toggle-simulated-logging":       {OperationRef: "logging.toggle", Title: "Toggle logging", Effect: apiv1.EffectWrite},
	"toggle-subscriber-updates":      {OperationRef: "updates.toggle", Title: "Toggle updates", Effect: apiv1.EffectWrite},
	"trigger-long-running-operation": {OperationRef: "long.run", Title: "Long run", Effect: apiv1.EffectRead},
}

// everythingExposed are the operations the test serves; every other one is --not-exposed.
var everythingExposed = []string{"image.tiny", "math.add", "repeat"}

// everythingProfile freezes the live server-everything with "mcpctl snapshot", lets edit change
// the recorded snapshot (nil: as frozen), drafts the document with "mcpctl profile init" and
// reviews it with everythingReview. It returns the profile file and the --not-exposed flags.
func everythingProfile(t *testing.T, server []string, edit func(*snapshot.ToolSnapshot) *snapshot.ToolSnapshot) (string, []string) {
	t.Helper()
	dir := t.TempDir()
	code, snap, errOut := runServerCLI(t, nil, append([]string{"snapshot"}, server...)...)
	if code != 0 {
		t.Fatalf("snapshot: exit %d: %s", code, errOut)
	}
	if edit != nil {
		var s snapshot.ToolSnapshot
		if err := json.Unmarshal([]byte(snap), &s); err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(edit(&s))
		if err != nil {
			t.Fatal(err)
		}
		snap = string(b)
	}
	snapPath := filepath.Join(dir, "snap.json")
	if err := os.WriteFile(snapPath, []byte(snap), 0o600); err != nil {
		t.Fatal(err)
	}
	code, prof, errOut := runServerCLI(t, nil, "profile", "init", "--snapshot", snapPath)
	if code != 0 {
		t.Fatalf("profile init: %s", errOut)
	}
	doc, err := ocipack.DecodeProfile([]byte(prof))
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Operations) != len(everythingReview) {
		t.Fatalf("server-everything@%s lists %d tools, the review maps %d", everythingVersion, len(doc.Operations), len(everythingReview))
	}
	var notExposed []string
	for i, o := range doc.Operations {
		r, ok := everythingReview[o.RemoteName]
		if !ok {
			t.Fatalf("server-everything@%s lists %q, which the review does not map", everythingVersion, o.RemoteName)
		}
		r.RemoteName = o.RemoteName
		doc.Operations[i] = r
		if !slices.Contains(everythingExposed, r.OperationRef) {
			notExposed = append(notExposed, "--not-exposed", r.OperationRef)
		}
	}
	b, err := ocipack.EncodeProfile(doc, ocipack.FormatYAML)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "profile.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, notExposed
}

// TestServeEverything: a real server nobody here wrote (npm server-everything, legacy 2025-11-25
// over stdio) behind serve with a reviewed profile of a subset of its tools: a go-sdk client lists
// exactly the admitted subset under the reviewed names and facts, and a call returns the server's
// result.
func TestServeEverything(t *testing.T) {
	server := everythingServer(t)
	prof, notExposed := everythingProfile(t, server, nil)
	s := startServe(t, append(append([]string{"--profile", prof}, notExposed...), server...)...)
	cs := s.stdioClient(t)
	tools := toolNames(t, cs)
	if got := keys(tools); !slices.Equal(got, everythingExposed) {
		t.Fatalf("tools %v, want %v\n%s", got, everythingExposed, s.stderr.String())
	}
	repeat := tools["repeat"]
	if repeat.Title != "Repeat" || repeat.Description != "Repeats a message back." || !repeat.Annotations.ReadOnlyHint {
		t.Fatalf("not the reviewed facts: %+v %+v", repeat, repeat.Annotations)
	}
	for _, tool := range tools {
		if strings.Contains(tool.Description, "Echoes") || strings.Contains(tool.Title, "Tool") {
			t.Fatalf("server prose reached the agent: %+v", tool)
		}
	}
	if text, isErr := callText(t, cs, "repeat", map[string]any{"message": "through serve"}); isErr || text != "Echo: through serve" {
		t.Fatalf("repeat: %q %v", text, isErr)
	}
	if text, isErr := callText(t, cs, "math.add", map[string]any{"a": 2, "b": 3}); isErr || !strings.Contains(text, "5") {
		t.Fatalf("math.add: %q %v", text, isErr)
	}
	// A not-exposed tool is not served under either name.
	for _, name := range []string{"env.dump", "get-env", "echo"} {
		if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{}}); err == nil || !strings.Contains(err.Error(), "unknown tool") {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if !strings.Contains(s.stderr.String(), "serving 3 reviewed tool(s)") {
		t.Fatalf("stderr:\n%s", s.stderr.String())
	}
}

// Must-fail twin of TestServeEverything: the reviewed snapshot records a different description of
// "echo" than the live server lists (a rug pull, seen from the other side): serve refuses to start
// with exit 4 and the classified diff on stderr, and serves nothing.
func TestServeEverythingDrift(t *testing.T) {
	server := everythingServer(t)
	prof, notExposed := everythingProfile(t, server, func(s *snapshot.ToolSnapshot) *snapshot.ToolSnapshot {
		descs := make([]json.RawMessage, 0, len(s.Tools))
		for _, tl := range s.Tools {
			d := tl.Descriptor
			if tl.Name == "echo" {
				var m map[string]any
				if err := json.Unmarshal(d, &m); err != nil {
					t.Fatal(err)
				}
				m["description"] = "Echoes back the input string (reviewed wording)"
				b, err := json.Marshal(m)
				if err != nil {
					t.Fatal(err)
				}
				d = b
			}
			descs = append(descs, d)
		}
		edited, err := snapshot.New(s.ProtocolVersion, s.ServerInfo, descs)
		if err != nil {
			t.Fatal(err)
		}
		return edited
	})
	s := startServe(t, append(append([]string{"--profile", prof}, notExposed...), server...)...)
	if code := s.exit(t); code != exitDrift {
		t.Fatalf("exit %d, want %d\n%s", code, exitDrift, s.stderr.String())
	}
	errOut := s.stderr.String()
	if !strings.Contains(errOut, `~ changed "echo"`) || !strings.Contains(errOut, "/description [text_only]") ||
		!strings.Contains(errOut, `not served: "echo" (repeat): tool_changed`) {
		t.Fatalf("no classified diff:\n%s", errOut)
	}
	if strings.Contains(errOut, "Echoes back") || strings.Contains(errOut, "serving ") {
		t.Fatalf("server prose or a served surface:\n%s", errOut)
	}
}
