// Package envtest holds the invocation stories that need a real kube-apiserver: the
// SubjectAccessReview that authorizes every invocation, decided by the apiserver's own RBAC
// authorizer, compared with what `kubectl auth can-i` says. The control plane is the project's
// (internal/devcluster: $KUBEBUILDER_ASSETS or the hack/control-plane.sh cache), started once in
// TestMain. Like test/envtest, without the binaries the package FAILS with a message saying how
// to build them; it never skips.
package envtest

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/devcluster"
)

var (
	cluster    *devcluster.Cluster
	scheme     = runtime.NewScheme()
	k8sClient  client.Client
	kubeconfig string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// The manager's logs would only interleave with test output.
	ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "FAIL: invocation envtest setup: "+format+"\n", args...)
		return 1
	}
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return fail("scheme: %v", err)
		}
	}
	root, err := devcluster.RepoRoot()
	if err != nil {
		return fail("%v", err)
	}
	cluster, err = devcluster.Start(devcluster.Options{
		CRDDirs: []string{filepath.Join(root, "config", "crd", "bases")},
		Scheme:  scheme,
	})
	if err != nil {
		return fail("%v", err)
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "invocation envtest teardown: %v\n", err)
		}
	}()
	dir, err := os.MkdirTemp("", "invocation-envtest-")
	if err != nil {
		return fail("%v", err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := cluster.WriteKubeconfig(kubeconfig); err != nil {
		return fail("%v", err)
	}
	if k8sClient, err = client.New(cluster.Config, client.Options{Scheme: scheme}); err != nil {
		return fail("client: %v", err)
	}
	return m.Run()
}

// newNamespace creates a fresh namespace for one test and deletes it when the test ends.
func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := k8sClient.Create(context.Background(), ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), ns) })
	return ns.Name
}

// create creates obj, failing the test on error.
func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := k8sClient.Create(context.Background(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

func clientKey(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }
