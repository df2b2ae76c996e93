package admission_test

import (
	"os/exec"
	"strings"
	"testing"
)

// goListDeps returns the packages pkgs depend on (go list -deps), themselves included.
func goListDeps(t *testing.T, pkgs ...string) map[string]bool {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "go", append([]string{"list", "-deps"}, pkgs...)...).Output()
	if err != nil {
		t.Fatalf("go list -deps %v: %v", pkgs, err)
	}
	deps := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		deps[p] = true
	}
	return deps
}

// TestNoKubernetesRegistryOrSigstore holds the promise of the package doc: a local consumer
// linking admission links no Kubernetes client, no registry client, no sigstore and no MCP
// implementation. The authority document type (api/v1) and its checks (ocipack) bring
// k8s.io/apimachinery's types and sigs.k8s.io's JSON and YAML decoders; admission adds no
// k8s.io or sigs.k8s.io package of its own beyond those.
func TestNoKubernetesRegistryOrSigstore(t *testing.T) {
	const module = "github.com/b10x/connector-mcp"
	deps := goListDeps(t, module+"/admission")
	forbidden := []string{
		"k8s.io/client-go", "k8s.io/api/", "sigs.k8s.io/controller-runtime", "k8s.io/apiextensions-apiserver",
		"github.com/sigstore/", "oras.land/", "github.com/google/go-containerregistry",
		"github.com/theupdateframework/", "github.com/in-toto/",
		"github.com/modelcontextprotocol/", module + "/internal/", module + "/mcpclient",
	}
	for p := range deps {
		for _, f := range forbidden {
			if strings.HasPrefix(p, f) {
				t.Errorf("admission depends on %s", p)
			}
		}
	}
	document := goListDeps(t, module+"/api/v1", module+"/ocipack")
	for p := range deps {
		if (strings.HasPrefix(p, "k8s.io/") || strings.HasPrefix(p, "sigs.k8s.io/")) && !document[p] {
			t.Errorf("admission adds Kubernetes package %s beyond api/v1 and ocipack", p)
		}
	}
}
