package devnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/b10x/connector-mcp/internal/imagebuild"
)

// registryServer is the node's in-memory OCI registry, served on loopback (for pushes from this
// machine) and on the host end of the veth pair (for the node's pulls), on one port.
type registryServer struct {
	servers []*http.Server
}

func (n *Node) startRegistry(ctx context.Context) error {
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	var lc net.ListenConfig
	lo, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	port := lo.Addr().(*net.TCPAddr).Port
	host, err := lc.Listen(ctx, "tcp", net.JoinHostPort(n.Network.HostIP.String(), strconv.Itoa(port)))
	if err != nil {
		_ = lo.Close()
		return err
	}
	n.registry = &registryServer{}
	for _, l := range []net.Listener{lo, host} {
		s := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		n.registry.servers = append(n.registry.servers, s)
		go func() { _ = s.Serve(l) }()
	}
	n.Registry = lo.Addr().String()
	// containerd resolves REGISTRY (loopback, as image references name it) through the host end of
	// the veth, over plain HTTP: the hosts.toml of config_path.
	dir := filepath.Join(n.WorkDir, "containerd", "certs.d", n.Registry)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	endpoint := "http://" + host.Addr().String()
	return os.WriteFile(filepath.Join(dir, "hosts.toml"), fmt.Appendf(nil,
		"server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", endpoint, endpoint), 0o600)
}

func (r *registryServer) stop() {
	for _, s := range r.servers {
		_ = s.Close()
	}
}

// pushPause builds the pause binary into an image and pushes it to the registry.
func (n *Node) pushPause(ctx context.Context) error {
	built, err := imagebuild.Build(ctx, imagebuild.Options{
		ModuleDir:  n.o.ModuleDir,
		Binaries:   []imagebuild.Binary{{Name: "pause", Package: "./internal/devnode/cmd/pause"}},
		Platforms:  []string{"linux/amd64"},
		SourceDate: time.Unix(315532800, 0).UTC(),
		Source:     imagebuild.DefaultSource, Revision: "devnode", Version: "devnode",
		Entrypoint: "/pause",
	})
	if err != nil {
		return err
	}
	pushed, err := imagebuild.Push(ctx, built, n.Registry+"/devnode/pause", "")
	if err != nil {
		return err
	}
	n.PauseImage = pushed.Ref
	return nil
}

func (n *Node) containerdDir() string { return filepath.Join(n.WorkDir, "containerd") }

// containerdSocket is containerd's CRI socket.
func (n *Node) containerdSocket() string { return filepath.Join(n.containerdDir(), "containerd.sock") }

func (n *Node) startContainerd(ctx context.Context) error {
	d := n.containerdDir()
	cni := `{"cniVersion": "1.0.0", "name": "devnode", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}], "dataDir": %q}},
  {"type": "portmap", "capabilities": {"portMappings": true}}
]}
`
	if err := os.WriteFile(filepath.Join(n.WorkDir, "cni", "net.d", "10-devnode.conflist"),
		fmt.Appendf(nil, cni, n.Network.PodCIDR, filepath.Join(n.WorkDir, "cni", "ipam")), 0o600); err != nil {
		return err
	}
	cfg := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.internal.v1.tracing", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[debug]
  address = ""
[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]q
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[7]q
    conf_dir = %[8]q
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = %[9]q
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %[10]q
`, filepath.Join(d, "root"), filepath.Join(d, "state"), n.containerdSocket(), n.containerdSocket()+".ttrpc",
		filepath.Join(d, "opt"), n.PauseImage, CNIPluginDir, filepath.Join(n.WorkDir, "cni", "net.d"),
		filepath.Join(n.WorkDir, "runc"), filepath.Join(d, "certs.d"))
	cfgFile := filepath.Join(d, "config.toml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		return err
	}
	p, err := n.start("containerd", "containerd", "--config", cfgFile)
	if err != nil {
		return err
	}
	return n.waitFor(ctx, p, time.Minute, "containerd socket", func(context.Context) error {
		_, err := os.Stat(n.containerdSocket())
		return err
	})
}

func (n *Node) startControllers(ctx context.Context) error {
	f := n.files()
	kcm, err := n.start("kube-controller-manager", filepath.Join(n.o.BinDir, "kube-controller-manager"),
		"--kubeconfig="+n.kubeconfigPath("controller-manager"),
		"--authentication-kubeconfig="+n.kubeconfigPath("controller-manager"),
		"--authorization-kubeconfig="+n.kubeconfigPath("controller-manager"),
		"--root-ca-file="+f.ca, "--service-account-private-key-file="+f.saKey,
		"--use-service-account-credentials=false", "--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port=10257", "--cert-dir="+filepath.Join(n.WorkDir, "kcm"),
		"--allocate-node-cidrs=false", "--profiling=false", "--v=0")
	if err != nil {
		return err
	}
	sched, err := n.start("kube-scheduler", filepath.Join(n.o.BinDir, "kube-scheduler"),
		"--kubeconfig="+n.kubeconfigPath("scheduler"),
		"--authentication-kubeconfig="+n.kubeconfigPath("scheduler"),
		"--authorization-kubeconfig="+n.kubeconfigPath("scheduler"),
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=10259",
		"--profiling=false", "--v=0")
	if err != nil {
		return err
	}
	time.Sleep(time.Second)
	if err := n.exited(kcm); err != nil {
		return err
	}
	return n.exited(sched)
}

// cgroupRoot is the kubelet's cgroupRoot: every Pod's cgroup lives below it, in every controller,
// so Stop finds every container process and removes every cgroup the node made.
const cgroupRoot = "connector-mcp-devnode"

// cgroupDirs lists the node's cgroup root in every mounted controller hierarchy.
func cgroupDirs() []string {
	var dirs []string
	ents, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range ents {
		d := filepath.Join("/sys/fs/cgroup", e.Name())
		if _, err := os.Stat(filepath.Join(d, "cgroup.procs")); err == nil {
			dirs = append(dirs, filepath.Join(d, cgroupRoot))
		}
	}
	return dirs
}

// makeCgroups creates the cgroup root the kubelet insists exists (cpuset needs its cpus and mems
// copied from the parent before a task may join).
func (n *Node) makeCgroups(context.Context) error {
	n.cgroup = cgroupRoot // from here on Stop sweeps and removes them, even if a mkdir fails
	for _, d := range cgroupDirs() {
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		if strings.HasSuffix(filepath.Dir(d), "cpuset") {
			for _, k := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(filepath.Dir(d), k))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(d, k), v, 0o644); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (n *Node) startKubelet(ctx context.Context) error {
	f := n.files()
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /%s
containerRuntimeEndpoint: unix://%s
address: %s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: %s
tlsPrivateKeyFile: %s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization: {mode: Webhook}
resolvConf: ""
failSwapOn: false
podLogsDir: %s
podCIDR: %s
maxPods: 60
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%%", nodefs.inodesFree: "1%%", imagefs.available: "1%%"}
shutdownGracePeriod: 0s
`, cgroupRoot, n.containerdSocket(), n.Network.NodeIP, f.kubeletCert, f.kubeletKey, f.ca,
		filepath.Join(n.WorkDir, "pod-logs"), n.Network.PodCIDR)
	cfgFile := filepath.Join(n.WorkDir, "kubelet", "config.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		return err
	}
	p, err := n.start("kubelet", filepath.Join(n.o.BinDir, "kubelet"),
		"--config="+cfgFile, "--kubeconfig="+n.kubeconfigPath("kubelet"),
		"--root-dir="+filepath.Join(n.WorkDir, "kubelet"), "--cert-dir="+filepath.Join(n.WorkDir, "kubelet", "pki"),
		"--hostname-override="+NodeName, "--node-ip="+n.Network.NodeIP.String(), "--v=0")
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(n.Config)
	if err != nil {
		return err
	}
	return n.waitFor(ctx, p, 2*time.Minute, "node registered", func(ctx context.Context) error {
		_, err := cs.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		return err
	})
}

func (n *Node) startKubeProxy(context.Context) error {
	cfg := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
mode: iptables
clusterCIDR: %s
hostnameOverride: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
iptables:
  masqueradeAll: true
`, n.kubeconfigPath("kube-proxy"), n.Network.PodCIDR, NodeName)
	cfgFile := filepath.Join(n.WorkDir, "kube-proxy.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		return err
	}
	p, err := n.start("kube-proxy", filepath.Join(n.o.BinDir, "kube-proxy"), "--config="+cfgFile, "--v=0")
	if err != nil {
		return err
	}
	time.Sleep(time.Second)
	return n.exited(p)
}

// waitNodeReady waits for the node's Ready condition, kube-root-ca.crt in the default namespace
// (projected tokens wait for it) and the default ServiceAccount.
func (n *Node) waitNodeReady(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(n.Config)
	if err != nil {
		return err
	}
	var kubelet *proc
	for _, p := range n.procs {
		if p.name == "kubelet" {
			kubelet = p
		}
	}
	return n.waitFor(ctx, kubelet, 3*time.Minute, "node Ready", func(ctx context.Context) error {
		node, err := cs.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		ready := false
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				ready = c.Status == corev1.ConditionTrue
				if !ready {
					return fmt.Errorf("node %s: %s", c.Reason, c.Message)
				}
			}
		}
		if !ready {
			return errors.New("node has no Ready condition yet")
		}
		if _, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{}); err != nil {
			return err
		}
		_, err = cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return errors.New("default ServiceAccount not created yet")
		}
		return err
	})
}
