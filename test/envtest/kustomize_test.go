package envtest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kubectlRun runs the control plane's own kubectl (its built-in kustomize included) against the
// test apiserver as cluster admin, with stdin (may be nil), and returns its combined output.
func kubectlRun(t *testing.T, stdin []byte, args ...string) (string, error) {
	t.Helper()
	kubectl := filepath.Join(cluster.BinDir, "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		t.Fatalf("kubectl is not in %s (hack/control-plane.sh builds it): %v", cluster.BinDir, err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := cluster.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(context.Background(), kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// managerNamespace is the namespace config/default installs into; a server-side dry run does not
// create it, so the tests create it for real first.
const managerNamespace = "connector-mcp-system"

// renderDefault renders config/default with kubectl's built-in kustomize and makes sure its
// namespace exists.
func renderDefault(t *testing.T) string {
	t.Helper()
	out, err := kubectlRun(t, nil, "kustomize", filepath.Join(repoRoot, "config", "default"))
	if err != nil {
		t.Fatalf("kustomize config/default: %v\n%s", err, out)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNamespace}}
	if err := k8sClient.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return out
}

// dryRunApply has the apiserver validate manifests (server-side dry run, strict fields).
func dryRunApply(t *testing.T, manifests string) (string, error) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "manifests.yaml")
	if err := os.WriteFile(f, []byte(manifests), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubectlRun(t, nil, "apply", "--dry-run=server", "--validate=strict", "-f", f)
}

// TestDefaultKustomizationIsValid renders config/default (CRDs, RBAC, manager) and has the real
// apiserver validate every object with a server-side dry run.
func TestDefaultKustomizationIsValid(t *testing.T) {
	out, err := dryRunApply(t, renderDefault(t))
	if err != nil {
		t.Fatalf("config/default does not apply: %v\n%s", err, out)
	}
	for _, want := range []string{
		"customresourcedefinition.apiextensions.k8s.io/mcpserviceprofiles.connectors.b10x.io",
		"customresourcedefinition.apiextensions.k8s.io/servicedeployments.connectors.b10x.io",
		"clusterrole.rbac.authorization.k8s.io/connector-mcp-manager-role",
		"deployment.apps/connector-mcp-controller-manager",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run does not list %s:\n%s", want, out)
		}
	}
}

// TestBrokenKustomizationIsRefused is the twin: the same manifests with an invalid manager
// Deployment are refused by the apiserver, naming the field.
func TestBrokenKustomizationIsRefused(t *testing.T) {
	rendered := renderDefault(t)
	broken := regexp.MustCompile(`(?m)^  replicas: [0-9]+$`).ReplaceAllString(rendered, "  replicas: -1")
	if broken == rendered {
		t.Fatal("the rendered manager Deployment has no spec.replicas to break")
	}
	out, err := dryRunApply(t, broken)
	if err == nil {
		t.Fatalf("an invalid Deployment was accepted:\n%s", out)
	}
	if !strings.Contains(out, "spec.replicas") {
		t.Errorf("refusal does not name spec.replicas:\n%s", out)
	}
}

// kustomizeImages returns every container image of the manifests kustomize renders from dir.
func kustomizeImages(t *testing.T, dir string) []string {
	t.Helper()
	out, err := kubectlRun(t, nil, "kustomize", filepath.Join(repoRoot, dir))
	if err != nil {
		t.Fatalf("kustomize %s: %v\n%s", dir, err, out)
	}
	var images []string
	for _, m := range regexp.MustCompile(`(?m)^\s+image: (\S+)$`).FindAllStringSubmatch(out, -1) {
		images = append(images, m[1])
	}
	return images
}

// config/default and config/gateway render the same published image as the chart's default
// (repository and appVersion), never the controller:latest placeholder. Twin: the placeholder is
// caught.
func TestKustomizationsNameThePublishedImage(t *testing.T) {
	chart, err := os.ReadFile(filepath.Join(repoRoot, "charts", "connector-mcp", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	values, err := os.ReadFile(filepath.Join(repoRoot, "charts", "connector-mcp", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	app := regexp.MustCompile(`(?m)^appVersion: "?([^"\s]+)"?$`).FindSubmatch(chart)
	repo := regexp.MustCompile(`(?m)^  repository: (\S+)$`).FindSubmatch(values)
	if app == nil || repo == nil {
		t.Fatal("no appVersion in Chart.yaml or image.repository in values.yaml")
	}
	want := string(repo[1]) + ":" + string(app[1])
	published := func(images []string) bool {
		for _, img := range images {
			if img != want {
				return false
			}
		}
		return len(images) > 0
	}
	for _, dir := range []string{"config/default", "config/gateway"} {
		if images := kustomizeImages(t, dir); !published(images) {
			t.Errorf("%s renders images %v, want %s (the chart's default)", dir, images, want)
		}
	}
	if published([]string{"controller:latest"}) {
		t.Fatal("twin: the placeholder image passed")
	}
}
