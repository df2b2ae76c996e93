package devcluster

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestScriptDefaultsMatch keeps the Go constants equal to hack/control-plane.sh's defaults, so the
// suites look for the binaries exactly where the script puts them.
func TestScriptDefaultsMatch(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join(root, "hack", "control-plane.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"KUBE_VERSION": KubeVersion, "ETCD_VERSION": EtcdVersion} {
		m := regexp.MustCompile(name + `="\$\{` + name + `:-([^}]+)\}"`).FindSubmatch(script)
		if m == nil {
			t.Fatalf("hack/control-plane.sh: no default for %s", name)
		}
		if got := string(m[1]); got != want {
			t.Errorf("hack/control-plane.sh defaults %s=%s, devcluster says %s", name, got, want)
		}
	}
	if !strings.Contains(string(script), `control-plane/kube-$KUBE_VERSION-etcd-$ETCD_VERSION`) {
		t.Error("hack/control-plane.sh no longer builds into control-plane/kube-<v>-etcd-<v>; update DefaultBinDir")
	}
}

func TestCacheRootPrecedence(t *testing.T) {
	t.Setenv("HOME", "/home/u")
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("CONNECTOR_MCP_CACHE", "")
	if got, _ := CacheRoot(); got != "/home/u/.cache/connector-mcp" {
		t.Errorf("HOME only: got %s", got)
	}
	t.Setenv("XDG_CACHE_HOME", "/xdg")
	if got, _ := CacheRoot(); got != "/xdg/connector-mcp" {
		t.Errorf("XDG_CACHE_HOME: got %s", got)
	}
	t.Setenv("CONNECTOR_MCP_CACHE", "/c")
	if got, _ := CacheRoot(); got != "/c" {
		t.Errorf("CONNECTOR_MCP_CACHE: got %s", got)
	}
	bin, _ := DefaultBinDir()
	if want := "/c/control-plane/kube-" + KubeVersion + "-etcd-" + EtcdVersion; bin != want {
		t.Errorf("DefaultBinDir = %s, want %s", bin, want)
	}
}

// fakeBinDir makes a directory holding the named files with the given mode.
func fakeBinDir(t *testing.T, mode os.FileMode, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestBinaryAssetsDir(t *testing.T) {
	t.Run("complete KUBEBUILDER_ASSETS is used", func(t *testing.T) {
		dir := fakeBinDir(t, 0o755, "etcd", "kube-apiserver")
		t.Setenv(AssetsEnv, dir)
		got, err := BinaryAssetsDir()
		if err != nil || got != dir {
			t.Fatalf("got %q, %v; want %q", got, err, dir)
		}
	})
	t.Run("KUBEBUILDER_ASSETS missing etcd is refused", func(t *testing.T) {
		dir := fakeBinDir(t, 0o755, "kube-apiserver")
		t.Setenv(AssetsEnv, dir)
		_, err := BinaryAssetsDir()
		if !errors.Is(err, ErrNoControlPlane) || !strings.Contains(err.Error(), "etcd") {
			t.Fatalf("got %v; want ErrNoControlPlane naming etcd", err)
		}
	})
	t.Run("non-executable binaries are refused", func(t *testing.T) {
		dir := fakeBinDir(t, 0o644, "etcd", "kube-apiserver")
		t.Setenv(AssetsEnv, dir)
		if _, err := BinaryAssetsDir(); !errors.Is(err, ErrNoControlPlane) {
			t.Fatalf("got %v; want ErrNoControlPlane", err)
		}
	})
	t.Run("unset KUBEBUILDER_ASSETS falls back to a complete cache", func(t *testing.T) {
		t.Setenv(AssetsEnv, "")
		t.Setenv("CONNECTOR_MCP_CACHE", t.TempDir())
		want, _ := DefaultBinDir()
		if err := os.MkdirAll(want, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, n := range RequiredBinaries {
			if err := os.WriteFile(filepath.Join(want, n), nil, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		got, err := BinaryAssetsDir()
		if err != nil || got != want {
			t.Fatalf("got %q, %v; want %q", got, err, want)
		}
	})
	t.Run("unset KUBEBUILDER_ASSETS and empty cache fail with the build command", func(t *testing.T) {
		t.Setenv(AssetsEnv, "")
		t.Setenv("CONNECTOR_MCP_CACHE", t.TempDir())
		_, err := BinaryAssetsDir()
		if !errors.Is(err, ErrNoControlPlane) || !strings.Contains(err.Error(), "make envtest-bins") {
			t.Fatalf("got %v; want ErrNoControlPlane telling how to build", err)
		}
	})
}

func TestDeclaresModule(t *testing.T) {
	for _, tc := range []struct {
		gomod string
		want  bool
	}{
		{"module github.com/b10x/connector-mcp\n\ngo 1.26\n", true},
		{"// x\nmodule \"github.com/b10x/connector-mcp\"\n", true},
		{"module github.com/b10x/connector-mcp/sub\n", false},
		{"module local/etcd\n", false},
	} {
		if got := declaresModule([]byte(tc.gomod), ModulePath); got != tc.want {
			t.Errorf("declaresModule(%q) = %v, want %v", tc.gomod, got, tc.want)
		}
	}
}
