// Package devnode runs a real single-node Kubernetes cluster on this machine for the end-to-end
// tests (`make e2e`) and `go run ./hack/node`: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, containerd (Debian's, with runc and the CNI bridge plugin), kubelet and
// kube-proxy, plus an in-memory OCI registry the node pulls every image from (nothing is pulled
// from anywhere else: the pause image is a static binary built here).
//
// Everything it starts lives in a network namespace it creates, joined to the machine only by a
// veth pair with private addresses (Network), so no Pod can reach beyond this machine: the
// namespace has no default route, the kubelet's resolv.conf is empty (no DNS lookup leaves), and
// the apiserver reaches the kubelet by InternalIP. Every component is told to keep its state in the
// work directory; Stop ends every process by PID (and every container process by its cgroup),
// unmounts what was mounted, removes the cgroups, the namespace and the link, restores every
// setting in GlobalSysctls it changed, and then reads the machine again: a difference is an error.
//
// It needs root, the binaries hack/control-plane.sh builds (with kube-controller-manager,
// kube-scheduler, kubelet and kube-proxy) and the Debian packages hack/node-deps.sh installs.
package devnode

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// NodeBinaries are the executables BinDir must hold, beyond kubectl.
var NodeBinaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy"}

// HostTools are the machine's executables the node needs (Debian packages containerd, runc,
// containernetworking-plugins, iptables, iproute2, util-linux); hack/node-deps.sh installs them.
var HostTools = []string{"containerd", "containerd-shim-runc-v2", "runc", "iptables", "ip", "nsenter", "unshare"}

// CNIPluginDir is where Debian's containernetworking-plugins puts the plugins.
const CNIPluginDir = "/usr/lib/cni"

// NodeName is the node's name (and the kubelet's hostname override).
const NodeName = "devnode"

// Errors Start returns, matched with errors.Is.
var (
	// ErrNotRoot means the process is not root: namespaces, mounts and cgroups need it.
	ErrNotRoot = errors.New("devnode: must run as root")
	// ErrMissingBinary means a node binary or host tool is missing.
	ErrMissingBinary = errors.New("devnode: missing binary")
	// ErrNotReady means a component did not become ready in time (its log is named).
	ErrNotReady = errors.New("devnode: component not ready")
	// ErrDirty means Stop found the machine different from how Start found it.
	ErrDirty = errors.New("devnode: machine not restored")
)

// Network is the node's addressing. The defaults are private ranges nothing on this machine uses;
// change them only if they collide.
type Network struct {
	// HostIP is the machine's end of the veth pair (the registry listens on it too), NodeIP the
	// node's end: the apiserver, kubelet and InternalIP.
	HostIP, NodeIP net.IP
	// PrefixLen is the veth subnet's prefix length.
	PrefixLen int
	// PodCIDR is the bridge's subnet, ServiceCIDR the ClusterIP range.
	PodCIDR, ServiceCIDR string
}

// DefaultNetwork is the addressing used when Options.Network is zero.
var DefaultNetwork = Network{
	HostIP: net.IPv4(10, 213, 0, 1), NodeIP: net.IPv4(10, 213, 0, 2), PrefixLen: 24,
	PodCIDR: "10.214.0.0/24", ServiceCIDR: "10.215.0.0/24",
}

// Options configure Start.
type Options struct {
	// BinDir holds NodeBinaries (hack/control-plane.sh's bin directory).
	BinDir string
	// ModuleDir is this repository's root (the pause image is built from it).
	ModuleDir string
	// WorkDir is where every component keeps its state; a new temporary directory when empty.
	// Stop removes it.
	WorkDir string
	// Network is the addressing; DefaultNetwork when HostIP is nil.
	Network Network
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// Node is a running node. Its fields are set by Start.
type Node struct {
	// Config is an admin (system:masters) client configuration for the apiserver.
	Config *rest.Config
	// Kubeconfig is the path of the admin kubeconfig file (for kubectl and helm).
	Kubeconfig string
	// Registry is the loopback address of the node's registry, HOST:PORT, as image references name
	// it (`make image IMAGE_REPO=<Registry>/connector-mcp`); the node pulls it through HostIP.
	Registry string
	// PauseImage is the sandbox image reference (in Registry).
	PauseImage string
	// Network is the node's addressing.
	Network Network
	// CAPEM is the cluster CA (apiserver, kubelet and kube-root-ca.crt).
	CAPEM []byte
	// WorkDir holds every component's state and logs (LogDir).
	WorkDir string

	o        Options
	before   *Machine
	netnsDir string
	netns    string
	hostLink string
	cgroup   string
	procs    []*proc
	registry *registryServer
	stopOnce sync.Once
	stopErr  error
}

// proc is one started component.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

// LogDir is where each component's output is written (one NAME.log per component).
func (n *Node) LogDir() string { return filepath.Join(n.WorkDir, "logs") }

// Start brings the node up and returns once the node is Ready, kube-root-ca.crt is published and
// the default ServiceAccount exists. On failure it stops whatever it started. A node left behind
// by a process that was killed (StateFile) is swept first; one whose process still runs is
// ErrBusy.
func Start(ctx context.Context, o Options) (n *Node, err error) {
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	if err := checkBinaries(o.BinDir); err != nil {
		return nil, err
	}
	if o.Network.HostIP == nil {
		o.Network = DefaultNetwork
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if err := sweepStale(); err != nil {
		return nil, err
	}
	before, err := ReadMachine(ctx)
	if err != nil {
		return nil, err
	}
	work := o.WorkDir
	if work == "" {
		if work, err = os.MkdirTemp("", "connector-mcp-devnode-"); err != nil {
			return nil, err
		}
	}
	n = &Node{o: o, before: before, WorkDir: work, Network: o.Network}
	defer func() {
		if err != nil {
			if serr := n.Stop(); serr != nil {
				err = fmt.Errorf("%w (and stopping: %w)", err, serr)
			}
			n = nil
		}
	}()
	if err := n.saveState(); err != nil {
		return n, err
	}
	for _, d := range []string{"logs", "pki", "etcd", "netns", "cni/net.d", "cni/ipam", "containerd/certs.d", "kubelet", "pod-logs", "runc"} {
		if err := os.MkdirAll(filepath.Join(work, d), 0o700); err != nil {
			return n, err
		}
	}
	steps := []struct {
		name string
		run  func(context.Context) error
	}{
		{"network namespace", n.startNetwork},
		{"registry", n.startRegistry},
		{"pause image", n.pushPause},
		{"certificates", n.writePKI},
		{"etcd", n.startEtcd},
		{"kube-apiserver", n.startAPIServer},
		{"containerd", n.startContainerd},
		{"kube-controller-manager and kube-scheduler", n.startControllers},
		{"cgroups", n.makeCgroups},
		{"kubelet", n.startKubelet},
		{"kube-proxy", n.startKubeProxy},
		{"node Ready", n.waitNodeReady},
	}
	for _, s := range steps {
		t0 := time.Now()
		err := s.run(ctx)
		if serr := n.saveState(); serr != nil && err == nil { // the link and cgroups it may have made
			err = serr
		}
		if err != nil {
			return n, fmt.Errorf("devnode: %s: %w", s.name, err)
		}
		n.logf("%s up (%.1fs)", s.name, time.Since(t0).Seconds())
	}
	return n, nil
}

func (n *Node) logf(format string, args ...any) {
	fmt.Fprintf(n.o.Log, "[devnode] "+format+"\n", args...)
}

func checkBinaries(dir string) error {
	var missing []string
	for _, b := range NodeBinaries {
		if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.Mode()&0o111 == 0 {
			missing = append(missing, filepath.Join(dir, b))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s; build them with `hack/control-plane.sh %s`", ErrMissingBinary,
			strings.Join(missing, ", "), strings.Join(NodeBinaries[2:], " "))
	}
	for _, t := range HostTools {
		if _, err := exec.LookPath(t); err != nil {
			missing = append(missing, t)
		}
	}
	if _, err := os.Stat(filepath.Join(CNIPluginDir, "bridge")); err != nil {
		missing = append(missing, filepath.Join(CNIPluginDir, "bridge"))
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s; install them with hack/node-deps.sh", ErrMissingBinary, strings.Join(missing, ", "))
	}
	return nil
}

// run runs a short command on the machine and returns its combined output on failure.
func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// inNS runs a short command inside the node's network namespace.
func (n *Node) inNS(ctx context.Context, name string, args ...string) error {
	return run(ctx, "nsenter", append([]string{"--net=" + n.netns, "--", name}, args...)...)
}

// startNetwork creates the namespace (a bind-mounted file in the work directory, not /run/netns)
// and the veth pair, routes the Service range to the node's link (there is no default route in the
// namespace) and the Pod range from this machine to the node.
func (n *Node) startNetwork(ctx context.Context) error {
	nw := n.Network
	n.netnsDir = filepath.Join(n.WorkDir, "netns")
	n.netns = filepath.Join(n.netnsDir, "node")
	if err := os.WriteFile(n.netns, nil, 0o600); err != nil {
		return err
	}
	if err := run(ctx, "unshare", "--net="+n.netns, "true"); err != nil {
		return err
	}
	n.hostLink = fmt.Sprintf("cmcp%d", os.Getpid()%100000)
	if err := run(ctx, "ip", "link", "add", n.hostLink, "type", "veth", "peer", "name", "eth0", "netns", n.netns); err != nil {
		n.hostLink = ""
		return err
	}
	cidr := func(ip net.IP) string { return fmt.Sprintf("%s/%d", ip, nw.PrefixLen) }
	for _, c := range [][]string{
		{"ip", "addr", "add", cidr(nw.HostIP), "dev", n.hostLink},
		{"ip", "link", "set", n.hostLink, "up"},
		// This machine reaches Pods directly (tests dial a Pod's port); the route goes with the link.
		{"ip", "route", "add", nw.PodCIDR, "via", nw.NodeIP.String(), "dev", n.hostLink},
	} {
		if err := run(ctx, c[0], c[1:]...); err != nil {
			return err
		}
	}
	for _, c := range [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"ip", "addr", "add", cidr(nw.NodeIP), "dev", "eth0"},
		{"ip", "link", "set", "eth0", "up"},
		{"ip", "route", "add", nw.ServiceCIDR, "dev", "eth0", "src", nw.NodeIP.String()},
	} {
		if err := n.inNS(ctx, c[0], c[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// AddNodeAddress adds ip to the node's interface inside its network namespace, beside NodeIP: a
// second address on the node's network that a hostNetwork Pod can listen on and that stays the
// same when that Pod is replaced (NodeIP itself is the apiserver's address, which the product's
// egress policy always refuses). The machine reaches it over the veth; it goes with the namespace
// on Stop. ip must lie in the node network and be neither HostIP nor NodeIP.
func (n *Node) AddNodeAddress(ctx context.Context, ip net.IP) error {
	nw := n.Network
	mask := net.CIDRMask(nw.PrefixLen, 32)
	if ip.To4() == nil || !ip.Mask(mask).Equal(nw.NodeIP.Mask(mask)) || ip.Equal(nw.HostIP) || ip.Equal(nw.NodeIP) {
		return fmt.Errorf("devnode: %s is not a free address of the node network %s/%d", ip, nw.NodeIP.Mask(mask), nw.PrefixLen)
	}
	return n.inNS(ctx, "ip", "addr", "add", fmt.Sprintf("%s/%d", ip, nw.PrefixLen), "dev", "eth0")
}

// start runs a long-lived component inside the namespace (nsenter execs it, so the PID is the
// component's), its output in LogDir/NAME.log.
func (n *Node) start(name, bin string, args ...string) (*proc, error) {
	logf, err := os.Create(filepath.Join(n.LogDir(), name+".log"))
	if err != nil {
		return nil, err
	}
	//nolint:noctx // a component outlives Start's context; Stop ends it by PID
	cmd := exec.Command("nsenter", append([]string{"--net=" + n.netns, "--", bin}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, err
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), log: logf}
	go func() { _ = cmd.Wait(); close(p.done) }()
	n.procs = append(n.procs, p)
	return p, nil
}

// exited reports an early exit of p as an error naming its log.
func (n *Node) exited(p *proc) error {
	select {
	case <-p.done:
		return fmt.Errorf("%w: %s exited (%v); see %s", ErrNotReady, p.name, p.cmd.ProcessState,
			filepath.Join(n.LogDir(), p.name+".log"))
	default:
		return nil
	}
}

// waitFor polls check until it succeeds, p exits, or timeout passes.
func (n *Node) waitFor(ctx context.Context, p *proc, timeout time.Duration, what string, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		if p != nil {
			if err := n.exited(p); err != nil {
				return err
			}
		}
		if last = check(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			log := ""
			if p != nil {
				log = "; see " + filepath.Join(n.LogDir(), p.name+".log")
			}
			return fmt.Errorf("%w: %s after %s: %w%s", ErrNotReady, what, timeout, last, log)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// pki holds the files writePKI wrote.
type pki struct {
	ca, apiCert, apiKey, kubeletCert, kubeletKey, apiClientCert, apiClientKey, saKey, saPub string
}

func (n *Node) pkiDir() string { return filepath.Join(n.WorkDir, "pki") }

func (n *Node) files() pki {
	d := n.pkiDir()
	j := func(s string) string { return filepath.Join(d, s) }
	return pki{
		ca: j("ca.crt"), apiCert: j("apiserver.crt"), apiKey: j("apiserver.key"),
		kubeletCert: j("kubelet-serving.crt"), kubeletKey: j("kubelet-serving.key"),
		apiClientCert: j("apiserver-kubelet-client.crt"), apiClientKey: j("apiserver-kubelet-client.key"),
		saKey: j("sa.key"), saPub: j("sa.pub"),
	}
}

// kubeconfigPath names a component's kubeconfig.
func (n *Node) kubeconfigPath(who string) string { return filepath.Join(n.pkiDir(), who+".kubeconfig") }

// firstServiceIP is the ClusterIP of the kubernetes Service (the range's first address).
func firstServiceIP(cidr string) (string, error) {
	_, ipnet, err := net.ParseCIDR(cidr)
	if err != nil {
		return "", err
	}
	ip := slices.Clone(ipnet.IP.To4())
	ip[3]++
	return ip.String(), nil
}

// writePKI writes the CA, the serving certificates, the service-account key and one kubeconfig
// per component: the admin and the controllers in system:masters, the kubelet as
// system:node:devnode (Node authorizer), kube-proxy as system:kube-proxy.
func (n *Node) writePKI(context.Context) error {
	ca, err := NewCA("connector-mcp devnode CA")
	if err != nil {
		return err
	}
	n.CAPEM = ca.certPEM
	f := n.files()
	if err := os.WriteFile(f.ca, ca.certPEM, 0o600); err != nil {
		return err
	}
	svcIP, err := firstServiceIP(n.Network.ServiceCIDR)
	if err != nil {
		return err
	}
	nodeIP := n.Network.NodeIP.String()
	api, err := ca.issue("kube-apiserver", nil, []string{nodeIP, svcIP, "kubernetes", "kubernetes.default",
		"kubernetes.default.svc", "kubernetes.default.svc.cluster.local"})
	if err != nil {
		return err
	}
	if _, _, err := api.write(n.pkiDir(), "apiserver"); err != nil {
		return err
	}
	kl, err := ca.issue("system:node:"+NodeName, []string{"system:nodes"}, []string{nodeIP, NodeName})
	if err != nil {
		return err
	}
	if _, _, err := kl.write(n.pkiDir(), "kubelet-serving"); err != nil {
		return err
	}
	kc, err := ca.issue("kube-apiserver-kubelet-client", []string{"system:masters"}, nil)
	if err != nil {
		return err
	}
	if _, _, err := kc.write(n.pkiDir(), "apiserver-kubelet-client"); err != nil {
		return err
	}
	if _, _, err := serviceAccountKey(n.pkiDir()); err != nil {
		return err
	}
	server := "https://" + net.JoinHostPort(nodeIP, "6443")
	for _, c := range []struct{ who, cn, org string }{
		{"admin", "devnode-admin", "system:masters"},
		{"controller-manager", "system:kube-controller-manager", "system:masters"},
		{"scheduler", "system:kube-scheduler", "system:masters"},
		{"kubelet", "system:node:" + NodeName, "system:nodes"},
		{"kube-proxy", "system:kube-proxy", ""},
	} {
		var orgs []string
		if c.org != "" {
			orgs = []string{c.org}
		}
		id, err := ca.issue(c.cn, orgs, nil)
		if err != nil {
			return err
		}
		if err := os.WriteFile(n.kubeconfigPath(c.who), kubeconfig(server, ca.certPEM, id, c.who), 0o600); err != nil {
			return err
		}
	}
	n.Kubeconfig = n.kubeconfigPath("admin")
	n.Config, err = clientcmd.BuildConfigFromFlags("", n.Kubeconfig)
	return err
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func (n *Node) startEtcd(ctx context.Context) error {
	p, err := n.start("etcd", filepath.Join(n.o.BinDir, "etcd"),
		"--data-dir", filepath.Join(n.WorkDir, "etcd"),
		"--listen-client-urls", "http://127.0.0.1:2379", "--advertise-client-urls", "http://127.0.0.1:2379",
		"--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
		"--initial-cluster", "default=http://127.0.0.1:2380", "--unsafe-no-fsync", "--log-level", "warn")
	if err != nil {
		return err
	}
	// etcd listens on the namespace's loopback, out of this process's reach: the apiserver's
	// readiness (which includes etcd's) is the check.
	return n.exited(p)
}

func (n *Node) startAPIServer(ctx context.Context) error {
	f := n.files()
	p, err := n.start("kube-apiserver", filepath.Join(n.o.BinDir, "kube-apiserver"),
		"--etcd-servers=http://127.0.0.1:2379",
		"--bind-address="+n.Network.NodeIP.String(), "--advertise-address="+n.Network.NodeIP.String(),
		"--secure-port=6443", "--service-cluster-ip-range="+n.Network.ServiceCIDR,
		"--client-ca-file="+f.ca, "--tls-cert-file="+f.apiCert, "--tls-private-key-file="+f.apiKey,
		"--kubelet-client-certificate="+f.apiClientCert, "--kubelet-client-key="+f.apiClientKey,
		"--kubelet-certificate-authority="+f.ca, "--kubelet-preferred-address-types=InternalIP",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+f.saPub, "--service-account-signing-key-file="+f.saKey,
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
		"--cert-dir="+filepath.Join(n.WorkDir, "apiserver"), "--profiling=false", "--v=0")
	if err != nil {
		return err
	}
	return n.waitFor(ctx, p, 3*time.Minute, "kube-apiserver /readyz", n.readyz)
}

// readyz asks the apiserver's /readyz as the admin.
func (n *Node) readyz(ctx context.Context) error {
	hc, err := rest.HTTPClientFor(n.Config)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.Config.Host+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("readyz: %s", resp.Status)
	}
	return nil
}
