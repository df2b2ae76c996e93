// Package envtest holds the integration suites that run against a real kube-apiserver and etcd
// (built from source by hack/control-plane.sh and started by controller-runtime's envtest). The
// control plane is started once per package in TestMain and shared by every suite file.
//
// Without control-plane binaries ($KUBEBUILDER_ASSETS unset and nothing in the cache) the suite
// FAILS with a message saying how to build them; it never skips.
package envtest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/devcluster"
)

// Shared by every suite file of this package; set up once by TestMain.
var (
	// cluster is the running control plane.
	cluster *devcluster.Cluster
	// cfg authenticates as a cluster administrator.
	cfg *rest.Config
	// scheme knows client-go's types, apiextensions/v1 and connectors.b10x.io/v1.
	scheme = runtime.NewScheme()
	// k8sClient is an admin client that asks for strict field validation on every write.
	k8sClient client.Client
	// repoRoot is the repository root (for config/ files).
	repoRoot string
)

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

// runSuite starts the control plane with the CRDs of config/crd/bases, runs the tests and stops
// the control plane. Any setup failure fails the package with a message naming the cause.
func runSuite(m *testing.M) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "FAIL: envtest setup: "+format+"\n", args...)
		return 1
	}
	// The stories give each manager its own logger where they read its logs; the global one is
	// set so controller-runtime does not print its "SetLogger was never called" stack trace.
	ctrllog.SetLogger(logr.Discard())
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, apiv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return fail("scheme: %v", err)
		}
	}
	var err error
	if repoRoot, err = devcluster.RepoRoot(); err != nil {
		return fail("%v", err)
	}
	cluster, err = devcluster.Start(devcluster.Options{
		CRDDirs: []string{filepath.Join(repoRoot, "config", "crd", "bases")},
		Scheme:  scheme,
	})
	if err != nil {
		return fail("%v", err)
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "envtest teardown: %v\n", err)
		}
	}()
	cfg = cluster.Config
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fail("client: %v", err)
	}
	k8sClient = client.WithFieldValidation(c, metav1.FieldValidationStrict)
	return m.Run()
}

// newNamespace creates a fresh namespace for one test and deletes it when the test ends.
func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	return newNamespaceTB(t, prefix)
}
