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
