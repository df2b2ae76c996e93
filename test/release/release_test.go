// Package release tests the make targets the release workflow (.github/workflows/release.yaml)
// calls: every publishing step of the pipeline runs one of them, so each is exercised here
// against loopback parts (an in-process OCI registry), never a public one.
package release

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/b10x/connector-mcp/internal/ocitest"
)

// repoRoot is the module root, two levels above this package.
var repoRoot = filepath.Join("..", "..")

// makeTarget runs `make TARGET VARS...` in the repository and returns its stdout.
func makeTarget(t *testing.T, target string, vars ...string) string {
	t.Helper()
	cmd := exec.CommandContext(context.Background(), "make", append([]string{"--no-print-directory", target}, vars...)...)
	cmd.Dir = repoRoot
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("make %s: %v\n%s%s", target, err, out.String(), errb.String())
	}
	return out.String()
}

// `make dist` builds mcpctl with the version and commit linked in (as `mcpctl version` reports
// them), static (CGO off), and writes SHA256SUMS that verify. One platform, this machine's, keeps the
// cold cost down and lets the binary run; the target's loop is the same for all four. Twin: a binary changed after the fact fails its checksum.
func TestDist(t *testing.T) {
	dir := t.TempDir()
	platform := runtime.GOOS + "/" + runtime.GOARCH
	makeTarget(t, "dist", "DIST_DIR="+dir, "DIST_PLATFORMS="+platform, "VERSION=v9.9.9-release", "COMMIT=0123abcd")
	bin := filepath.Join(dir, "mcpctl-v9.9.9-release-"+runtime.GOOS+"-"+runtime.GOARCH)
	out, err := exec.CommandContext(context.Background(), bin, "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "mcpctl v9.9.9-release (commit 0123abcd, ") {
		t.Fatalf("%s --version: %v %q", bin, err, out)
	}
	info, err := exec.CommandContext(context.Background(), "go", "version", "-m", bin).Output()
	if err != nil || !strings.Contains(string(info), "CGO_ENABLED=0") || !strings.Contains(string(info), "-trimpath=true") {
		t.Fatalf("build info of %s: %v\n%s", bin, err, info)
	}
	sums, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	verify := func() []string {
		var bad []string
		lines := strings.Split(strings.TrimSpace(string(sums)), "\n")
		if len(lines) != 1 {
			t.Fatalf("SHA256SUMS has %d lines:\n%s", len(lines), sums)
		}
		for _, l := range lines {
			sum, name, ok := strings.Cut(l, "  ")
			b, err := os.ReadFile(filepath.Join(dir, filepath.Base(name)))
			h := sha256.Sum256(b)
			if !ok || err != nil || hex.EncodeToString(h[:]) != sum {
				bad = append(bad, name)
			}
		}
		return bad
	}
	if bad := verify(); len(bad) != 0 {
		t.Fatalf("checksums do not verify: %v", bad)
	}
	f, err := os.OpenFile(bin, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.Write([]byte{0})
	f.Close()
	if bad := verify(); len(bad) != 1 {
		t.Fatalf("twin: a changed binary passed its checksum (%v)", bad)
	}
}

// `make chart-push` packages the chart with the release's version and appVersion and pushes it
// as an OCI artifact; the digest it prints is the one the registry serves for the tag, and helm
// pulls the same chart back. Twin: without CHART_REPO it refuses (exit 2) before packaging.
func TestChartPush(t *testing.T) {
	reg := ocitest.New(ocitest.Options{})
	defer reg.Close()
	dir := t.TempDir()
	out := makeTarget(t, "chart-push", "DIST_DIR="+dir, "VERSION=v9.9.9", "CHART_REPO="+reg.Host+"/charts")
	digest := regexp.MustCompile(`(?m)^sha256:[0-9a-f]{64}$`).FindString(out)
	if digest == "" {
		t.Fatalf("chart-push printed no digest:\n%s", out)
	}
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodHead, "http://"+reg.Host+"/v2/charts/connector-mcp/manifests/9.9.9", nil)
	req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("Docker-Content-Digest"); got != digest {
		t.Fatalf("the registry serves %q for 9.9.9, chart-push printed %s", got, digest)
	}
	helmPath, err := exec.CommandContext(context.Background(), filepath.Join(repoRoot, "hack", "tools.sh"), "--path", "helm").Output()
	if err != nil {
		t.Fatalf("hack/tools.sh --path helm: %v", err)
	}
	helm := strings.TrimSpace(string(helmPath))
	pulled := t.TempDir()
	cmd := exec.CommandContext(context.Background(), helm, "pull", "oci://"+reg.Host+"/charts/connector-mcp", "--version", "9.9.9",
		"--plain-http", "--untar", "-d", pulled)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helm pull: %v\n%s", err, b)
	}
	chart, err := os.ReadFile(filepath.Join(pulled, "connector-mcp", "Chart.yaml"))
	if err != nil || !strings.Contains(string(chart), "version: 9.9.9") || !strings.Contains(string(chart), "appVersion: v9.9.9") {
		t.Fatalf("pulled Chart.yaml: %v\n%s", err, chart)
	}
	cmd = exec.CommandContext(context.Background(), "make", "--no-print-directory", "chart-push", "DIST_DIR="+t.TempDir(), "CHART_REPO=")
	cmd.Dir = repoRoot
	if b, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(b), "set CHART_REPO") {
		t.Fatalf("twin: chart-push without CHART_REPO: %v\n%s", err, b)
	}
}
