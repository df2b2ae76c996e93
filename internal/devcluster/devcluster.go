// Package devcluster runs a throwaway Kubernetes control plane (etcd + kube-apiserver, started by
// controller-runtime's envtest) from the binaries that hack/control-plane.sh builds from source,
// with the project's CRDs installed. The envtest suites and `make quickstart` both use it, so
// there is one place that knows where the binaries live.
package devcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Versions of the control plane that hack/control-plane.sh builds by default. They name the cache
// directory; TestScriptDefaultsMatch keeps them equal to the script's defaults.
const (
	KubeVersion = "v1.37.2"
	EtcdVersion = "v3.7.3"
)

// AssetsEnv is the environment variable envtest reads for the control-plane bin directory.
const AssetsEnv = "KUBEBUILDER_ASSETS"

// ModulePath is the Go module path of this repository; RepoRoot looks for the go.mod declaring it.
const ModulePath = "github.com/b10x/connector-mcp"

// RequiredBinaries are the executables a bin directory must hold to start a control plane.
var RequiredBinaries = []string{"etcd", "kube-apiserver"}

// ErrNoControlPlane reports that no usable control-plane bin directory was found.
var ErrNoControlPlane = errors.New("control-plane binaries not found")

// CacheRoot returns the project's cache root, the same directory the hack/ scripts use:
// $CONNECTOR_MCP_CACHE, else $XDG_CACHE_HOME/connector-mcp, else $HOME/.cache/connector-mcp.
func CacheRoot() (string, error) {
	if v := os.Getenv("CONNECTOR_MCP_CACHE"); v != "" {
		return v, nil
	}
	if v := os.Getenv("XDG_CACHE_HOME"); v != "" {
		return filepath.Join(v, "connector-mcp"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("devcluster: locate cache root: %w", err)
	}
	return filepath.Join(home, ".cache", "connector-mcp"), nil
}

// DefaultBinDir returns the versioned directory hack/control-plane.sh builds into, whether or not
// it exists yet.
func DefaultBinDir() (string, error) {
	root, err := CacheRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "control-plane", "kube-"+KubeVersion+"-etcd-"+EtcdVersion), nil
}

// BinaryAssetsDir returns the control-plane bin directory to use: $KUBEBUILDER_ASSETS when set,
// else the cached build from DefaultBinDir. It fails with an error wrapping ErrNoControlPlane,
// naming the directory and the command that builds it, when the binaries are missing.
func BinaryAssetsDir() (string, error) {
	dir, source := os.Getenv(AssetsEnv), AssetsEnv
	if dir == "" {
		var err error
		if dir, err = DefaultBinDir(); err != nil {
			return "", err
		}
		source = "the control-plane cache (" + AssetsEnv + " is unset)"
	}
	if err := CheckBinDir(dir); err != nil {
		return "", fmt.Errorf("%w in %s from %s: %w; build them with `make envtest-bins` (hack/control-plane.sh)",
			ErrNoControlPlane, dir, source, err)
	}
	return dir, nil
}

// CheckBinDir verifies that dir holds every RequiredBinaries entry as an executable file.
func CheckBinDir(dir string) error {
	var missing []string
	for _, name := range RequiredBinaries {
		fi, err := os.Stat(filepath.Join(dir, name)) //nolint:gosec // the operator chooses the bin dir (KUBEBUILDER_ASSETS); only stat, no read
		if err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing or not executable: %s", strings.Join(missing, ", "))
	}
	return nil
}

// RepoRoot walks up from the working directory to the directory whose go.mod declares ModulePath.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("devcluster: %w", err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod")) //nolint:gosec // path built from cwd, read-only
		if err == nil && declaresModule(data, ModulePath) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("devcluster: no go.mod for module %s above the working directory", ModulePath)
		}
		dir = parent
	}
}

// declaresModule reports whether a go.mod's module line names path.
func declaresModule(gomod []byte, path string) bool {
	for _, line := range strings.Split(string(gomod), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "module" && strings.Trim(f[1], `"`) == path {
			return true
		}
	}
	return false
}

// Options configure Start. The zero value starts a control plane from BinaryAssetsDir with the
// CRDs of config/crd/bases.
type Options struct {
	// BinDir holds etcd and kube-apiserver; empty means BinaryAssetsDir().
	BinDir string
	// CRDDirs are directories of CRD manifests to install; empty means <repo>/config/crd/bases.
	CRDDirs []string
	// Scheme is used to install CRDs and build clients; nil means client-go's default scheme.
	Scheme *runtime.Scheme
	// AttachOutput copies etcd's and kube-apiserver's output to this process's stdout/stderr.
	AttachOutput bool
	// StartTimeout bounds the start of each of etcd and kube-apiserver; zero means
	// DefaultStartTimeout.
	StartTimeout time.Duration
}

// DefaultStartTimeout is generous: on a loaded two-core CI machine, with test binaries linking
// beside it, kube-apiserver can take far longer than its usual few seconds to become ready.
const DefaultStartTimeout = 3 * time.Minute

// Cluster is a running local control plane. Stop it when done.
type Cluster struct {
	env *envtest.Environment
	// Config authenticates as a cluster administrator (system:masters).
	Config *rest.Config
	// KubeConfig is Config as a kubeconfig file, for kubectl.
	KubeConfig []byte
	// BinDir is the directory the binaries were started from.
	BinDir string
	// certDir holds kube-apiserver's serving certificates. The cluster owns it (envtest would
	// make a fresh one, with a new serving CA, on every start), so the apiserver can be stopped
	// and started again while etcd keeps its data and every client keeps working.
	certDir string
}

// Start launches etcd and kube-apiserver, installs the CRDs and waits until they are served.
func Start(opts Options) (*Cluster, error) {
	bin := opts.BinDir
	if bin == "" {
		var err error
		if bin, err = BinaryAssetsDir(); err != nil {
			return nil, err
		}
	} else if err := CheckBinDir(bin); err != nil {
		return nil, fmt.Errorf("%w in %s: %w", ErrNoControlPlane, bin, err)
	}
	crdDirs := opts.CRDDirs
	if len(crdDirs) == 0 {
		root, err := RepoRoot()
		if err != nil {
			return nil, err
		}
		crdDirs = []string{filepath.Join(root, "config", "crd", "bases")}
	}
	// envtest prefers $KUBEBUILDER_ASSETS over BinaryAssetsDirectory; pin both to the chosen dir.
	if err := os.Setenv(AssetsEnv, bin); err != nil {
		return nil, fmt.Errorf("devcluster: %w", err)
	}
	timeout := opts.StartTimeout
	if timeout == 0 {
		timeout = DefaultStartTimeout
	}
	certDir, err := os.MkdirTemp("", "devcluster-apiserver-")
	if err != nil {
		return nil, fmt.Errorf("devcluster: %w", err)
	}
	env := &envtest.Environment{
		ControlPlaneStartTimeout: timeout,
		BinaryAssetsDirectory:    bin,
		CRDDirectoryPaths:        crdDirs,
		ErrorIfCRDPathMissing:    true,
		Scheme:                   opts.Scheme,
		AttachControlPlaneOutput: opts.AttachOutput,
	}
	env.ControlPlane.GetAPIServer().CertDir = certDir
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		_ = os.RemoveAll(certDir)
		return nil, fmt.Errorf("devcluster: start control plane from %s: %w", bin, err)
	}
	return &Cluster{env: env, Config: cfg, KubeConfig: env.KubeConfig, BinDir: bin, certDir: certDir}, nil
}

// WriteKubeconfig writes KubeConfig to path with mode 0600. The file appears atomically, so a
// script polling for it never reads a partial file.
func (c *Cluster) WriteKubeconfig(path string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".kubeconfig-*")
	if err != nil {
		return fmt.Errorf("devcluster: write kubeconfig: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(c.KubeConfig); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("devcluster: write kubeconfig: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("devcluster: write kubeconfig: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("devcluster: write kubeconfig: %w", err)
	}
	return nil
}

// Stop terminates kube-apiserver and etcd and removes their temporary data.
func (c *Cluster) Stop() error {
	defer func() { _ = os.RemoveAll(c.certDir) }()
	if err := c.env.Stop(); err != nil {
		return fmt.Errorf("devcluster: stop control plane: %w", err)
	}
	return nil
}

// APIServerStopGrace is how long a kube-apiserver started by StartAPIServer may take to exit
// after SIGTERM before it is killed, as a kubelet's termination grace period does. (kube-apiserver
// stops listening at once but may wait much longer for in-flight watches to end; the first
// process, started with the cluster, has envtest's own stop timeout.)
const APIServerStopGrace = 5 * time.Second

// StopAPIServer stops kube-apiserver (SIGTERM, then SIGKILL once its stop timeout has passed)
// and leaves etcd running with its data, as a control-plane restart does. It returns once the
// apiserver's port refuses connections. StartAPIServer starts it again.
func (c *Cluster) StopAPIServer() error {
	as := c.env.ControlPlane.GetAPIServer()
	err := as.Stop()
	if err == nil {
		return nil
	}
	// envtest reports a stop that needed SIGKILL as an error; the stop is complete all the same
	// once nothing listens on the port.
	addr := net.JoinHostPort(as.Address, as.Port)
	dialer := &net.Dialer{Timeout: time.Second}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		conn, derr := dialer.DialContext(context.Background(), "tcp", addr)
		if derr != nil {
			return nil
		}
		_ = conn.Close()
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("devcluster: stop kube-apiserver: %w", err)
}

// StartAPIServer starts kube-apiserver again after StopAPIServer, on the same address with the
// same serving certificates and client CA, and waits until it is healthy: Config and every
// client made from it keep working.
func (c *Cluster) StartAPIServer() error {
	as := c.env.ControlPlane.GetAPIServer()
	as.StopTimeout = APIServerStopGrace
	if err := as.Start(); err != nil {
		return fmt.Errorf("devcluster: start kube-apiserver: %w", err)
	}
	return nil
}
