package devcluster

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runScript runs a hack/ script with bash and the given extra environment; it returns stdout,
// stderr and the exit code.
func runScript(t *testing.T, env []string, script string, args ...string) (string, string, int) {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(context.Background(), "bash", append([]string{filepath.Join(root, "hack", script)}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return stdout.String(), stderr.String(), 0
	case errors.As(err, &exit):
		return stdout.String(), stderr.String(), exit.ExitCode()
	default:
		t.Fatalf("run %s: %v", script, err)
		return "", "", -1
	}
}

// TestControlPlaneScriptReusesCache: with every binary cached, the script builds nothing and
// prints exactly the bin directory on stdout (callers use KUBEBUILDER_ASSETS="$(...)"), the same
// directory DefaultBinDir names.
func TestControlPlaneScriptReusesCache(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("CONNECTOR_MCP_CACHE", cache)
	dir, err := DefaultBinDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"etcd", "kube-apiserver", "kubectl"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\n"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	stdout, stderr, code := runScript(t, []string{"CONNECTOR_MCP_CACHE=" + cache}, "control-plane.sh")
	if code != 0 || stdout != dir+"\n" {
		t.Fatalf("exit %d, stdout %q; want 0 and %q\nstderr: %s", code, stdout, dir+"\n", stderr)
	}
	if !strings.Contains(stderr, "Using cached binaries") {
		t.Errorf("stderr does not say the cache was used: %s", stderr)
	}
}

// TestToolsScript: --path prints a cached tool's versioned path and installs nothing; an unknown
// tool is a usage error naming the known ones.
func TestToolsScript(t *testing.T) {
	cache := t.TempDir()
	bin := filepath.Join(cache, "tools", "controller-gen-v0.23.0", "controller-gen")
	if err := os.MkdirAll(filepath.Dir(bin), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	env := []string{"CONNECTOR_MCP_CACHE=" + cache}
	t.Run("cached tool", func(t *testing.T) {
		stdout, stderr, code := runScript(t, env, "tools.sh", "--path", "controller-gen")
		if code != 0 || stdout != bin+"\n" {
			t.Fatalf("exit %d, stdout %q; want 0 and %q\nstderr: %s", code, stdout, bin+"\n", stderr)
		}
	})
	t.Run("unknown tool", func(t *testing.T) {
		stdout, stderr, code := runScript(t, env, "tools.sh", "--path", "kubebuilder")
		if code != 2 || stdout != "" || !strings.Contains(stderr, "Unknown tool 'kubebuilder'") || !strings.Contains(stderr, "golangci-lint") {
			t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 naming the known tools", code, stdout, stderr)
		}
	})
}
