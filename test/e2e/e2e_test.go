//go:build e2e

// Package e2e runs the product where users run it: a real node (internal/devnode: kubelet,
// containerd, kube-proxy in a network namespace of this machine), the image `make image` builds,
// the chart installed with `helm install` exactly as docs/install.md tells users. `make e2e` runs
// it as root; it is not part of `make test` (it needs root, the node binaries and the Debian
// packages hack/node-deps.sh installs).
package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/b10x/connector-mcp/internal/devcluster"
	"github.com/b10x/connector-mcp/internal/devnode"
)

const (
	release   = "connector-mcp"
	namespace = "connector-mcp-system"
	tlsSecret = "gateway-tls"
)

// env is what every step shares.
type env struct {
	root       string
	node       *devnode.Node
	cs         *kubernetes.Clientset
	kubectl    string
	helm       string
	imageRepo  string
	digest     string
	installCmd []string
	act        *activation
}

// cmd runs name in the repository root with the node's kubeconfig and returns its stdout; an error
// carries its stderr.
func (e *env) cmd(ctx context.Context, name string, args ...string) (string, error) {
	return e.cmdEnv(ctx, nil, name, args...)
}

// cmdEnv is cmd with more environment variables.
func (e *env) cmdEnv(ctx context.Context, env []string, name string, args ...string) (string, error) {
	c := exec.CommandContext(ctx, name, args...)
	c.Dir = e.root
	c.Env = append(append(os.Environ(), "KUBECONFIG="+e.node.Kubeconfig), env...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	if err != nil {
		return out.String(), fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

// must is cmd that ends the (sub)test t on failure.
func (e *env) must(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := e.cmd(t.Context(), name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestE2E(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	root, bin := repoAndBins(t)
	before, err := devnode.ReadMachine(ctx)
	if err != nil {
		t.Fatal(err)
	}
	node, err := devnode.Start(ctx, devnode.Options{BinDir: bin, ModuleDir: root, Log: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		if t.Failed() {
			dumpLogs(t, node)
		}
		if err := node.Stop(); err != nil {
			t.Errorf("stop the node: %v", err)
		}
	}
	defer stop()
	cs, err := kubernetes.NewForConfig(node.Config)
	if err != nil {
		t.Fatal(err)
	}
	helm, err := exec.Command(filepath.Join(root, "hack/tools.sh"), "--path", "helm").Output()
	if err != nil {
		t.Fatalf("helm: %v", err)
	}
	e := &env{root: root, node: node, cs: cs, kubectl: filepath.Join(bin, "kubectl"), helm: strings.TrimSpace(string(helm))}

	if !t.Run("install", e.install) {
		t.FailNow()
	}
	t.Run("pods", e.podsRunUnderTheChart)
	t.Run("leader election", e.leaderLease)
	t.Run("gateway TLS rotation", e.tlsRotation)
	if !t.Run("activation", e.activate) {
		t.FailNow()
	}
	t.Run("caller through the Service", e.callerThroughTheService)
	t.Run("TypeScript agent through the Service", e.tsAgentThroughTheService)
	t.Run("leader takeover", e.leaderTakeover)
	t.Run("upgrade", e.upgrade)
	t.Run("drift", e.drift)
	t.Run("remove tenants", e.removeTenants)
	t.Run("uninstall", e.uninstall)

	stop()
	after, err := devnode.ReadMachine(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := before.Diff(after); len(d) > 0 {
		t.Errorf("the machine is not as the test found it:\n  %s", strings.Join(d, "\n  "))
	}
}

// repoAndBins returns the repository root and the node binaries' directory (KUBEBUILDER_ASSETS,
// else the versioned cache).
func repoAndBins(t *testing.T) (root, bin string) {
	t.Helper()
	root, err := devcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if bin = os.Getenv(devcluster.AssetsEnv); bin == "" {
		if bin, err = devcluster.DefaultBinDir(); err != nil {
			t.Fatal(err)
		}
	}
	return root, bin
}

// installSteps reads the install block of docs/install.md ("## On a real node"): the first sh
// block after that heading, one command per line (backslash continuations joined).
func installSteps(t *testing.T, root string) [][]string {
	doc, err := os.ReadFile(filepath.Join(root, "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(doc), "## On a real node")
	if !ok {
		t.Fatal(`docs/install.md has no "## On a real node" section`)
	}
	_, block, ok := strings.Cut(sec, "```sh\n")
	if !ok {
		t.Fatal("docs/install.md: no sh block in the real-node section")
	}
	block, _, _ = strings.Cut(block, "```")
	var steps [][]string
	for _, line := range strings.Split(strings.ReplaceAll(block, "\\\n", " "), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			steps = append(steps, f)
		}
	}
	return steps
}

// install runs docs/install.md's real-node block: make image into the node's registry, the
// namespace with restricted Pod Security enforced, the gateway's TLS Secret, helm install.
func (e *env) install(t *testing.T) {
	ca, err := devnode.NewCA("e2e gateway CA")
	if err != nil {
		t.Fatal(err)
	}
	tlsCA = ca
	certPEM, keyPEM, err := ca.Issue(gatewayHosts()[0], nil, gatewayHosts())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, b := range map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e.imageRepo = e.node.Registry + "/connector-mcp"
	for _, step := range installSteps(t, e.root) {
		for i, a := range step {
			a = strings.ReplaceAll(a, "$REGISTRY", e.node.Registry)
			a = strings.ReplaceAll(a, "$DIGEST", e.digest)
			a = strings.Replace(a, "=tls.crt", "="+filepath.Join(dir, "tls.crt"), 1)
			step[i] = strings.Replace(a, "=tls.key", "="+filepath.Join(dir, "tls.key"), 1)
		}
		name := map[string]string{"kubectl": e.kubectl, "helm": e.helm, "make": "make"}[step[0]]
		if name == "" {
			t.Fatalf("docs/install.md real-node block: unknown command %q", step[0])
		}
		t.Logf("$ %s", strings.Join(step, " "))
		out := e.must(t, name, step[1:]...)
		if step[0] == "make" {
			if e.digest = digestIn(out); e.digest == "" {
				t.Fatalf("make image printed no digest: %q", out)
			}
			t.Logf("image %s@%s", e.imageRepo, e.digest)
		}
	}
	if e.digest == "" {
		t.Fatal("the install block built no image")
	}
}

// gatewayHosts are the names the chart's gateway certificate must carry (its Service's DNS names).
func gatewayHosts() []string {
	svc := release + "-gateway"
	return []string{svc, svc + "." + namespace, svc + "." + namespace + ".svc", svc + "." + namespace + ".svc.cluster.local"}
}

// tlsCA signs the gateway's serving certificates (the test's stand-in for the platform's issuer).
var tlsCA *devnode.CA

func (e *env) writeTLSSecret(ctx context.Context, ca *devnode.CA) error {
	certPEM, keyPEM, err := ca.Issue(gatewayHosts()[0], nil, gatewayHosts())
	if err != nil {
		return err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: tlsSecret, Namespace: namespace},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM},
	}
	cur, err := e.cs.CoreV1().Secrets(namespace).Get(ctx, tlsSecret, metav1.GetOptions{})
	if err == nil {
		cur.Data = s.Data
		_, err = e.cs.CoreV1().Secrets(namespace).Update(ctx, cur, metav1.UpdateOptions{})
		return err
	}
	_, err = e.cs.CoreV1().Secrets(namespace).Create(ctx, s, metav1.CreateOptions{})
	return err
}

// podsRunUnderTheChart: every Pod of the release is Running and Ready, under the chart's
// ServiceAccounts, read-only root, non-root, in a namespace that enforces restricted.
func (e *env) podsRunUnderTheChart(t *testing.T) {
	ctx := t.Context()
	ns, err := e.cs.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Fatalf("namespace %s does not enforce restricted Pod Security: %v", namespace, ns.Labels)
	}
	pods, err := e.cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{release: 0, release + "-gateway": 0}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning {
			t.Errorf("pod %s: phase %s", p.Name, p.Status.Phase)
		}
		ready := false
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		if !ready {
			t.Errorf("pod %s is not Ready", p.Name)
		}
		if _, ok := want[p.Spec.ServiceAccountName]; !ok {
			t.Errorf("pod %s runs as ServiceAccount %q, not one of the chart's", p.Name, p.Spec.ServiceAccountName)
		}
		want[p.Spec.ServiceAccountName]++
		for _, c := range p.Spec.Containers {
			if !strings.HasSuffix(c.Image, "@"+e.digest) {
				t.Errorf("pod %s container %s image %s, want the built digest %s", p.Name, c.Name, c.Image, e.digest)
			}
			sc := c.SecurityContext
			if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				t.Errorf("pod %s container %s: root filesystem is not read-only", p.Name, c.Name)
			}
			if c.ReadinessProbe == nil || c.LivenessProbe == nil {
				t.Errorf("pod %s container %s: the chart's probes are missing", p.Name, c.Name)
			}
		}
		for _, st := range p.Status.ContainerStatuses {
			if !strings.HasSuffix(st.ImageID, "@"+e.digest) {
				t.Errorf("pod %s runs image %q, not the built index %s", p.Name, st.ImageID, e.digest)
			}
		}
	}
	for sa, n := range want {
		if n != 2 {
			t.Errorf("%d Ready pods run as %s, want 2 (the chart's replicas)", n, sa)
		}
	}
}

// leaderLease: one manager replica holds the chart's Lease.
func (e *env) leaderLease(t *testing.T) {
	ctx := t.Context()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		leases, err := e.cs.CoordinationV1().Leases(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range leases.Items {
			if l.Spec.HolderIdentity != nil && strings.HasPrefix(*l.Spec.HolderIdentity, release+"-") {
				t.Logf("lease %s held by %s", l.Name, *l.Spec.HolderIdentity)
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no manager pod holds a Lease in %s: %d leases", namespace, len(leases.Items))
		}
		time.Sleep(2 * time.Second)
	}
}

// gatewayPodIPs lists the Ready gateway Pods' addresses.
func (e *env) gatewayPodIPs(ctx context.Context, t *testing.T) []string {
	pods, err := e.cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=gateway"})
	if err != nil {
		t.Fatal(err)
	}
	var ips []string
	for _, p := range pods.Items {
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			ips = append(ips, p.Status.PodIP)
		}
	}
	if len(ips) == 0 {
		t.Fatal("no gateway pod has an IP")
	}
	return ips
}

// servedSerial is the serial of the certificate the gateway at ip serves, verified against the
// test CA for the Service's name.
func servedSerial(ctx context.Context, ip string, port int) (string, error) {
	pool := x509.NewCertPool()
	pool.AddCert(tlsCA.Certificate())
	d := &tls.Dialer{Config: &tls.Config{RootCAs: pool, ServerName: gatewayHosts()[2], MinVersion: tls.VersionTLS12}}
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(ip, fmt.Sprint(port)))
	if err != nil {
		return "", err
	}
	defer func() { _ = c.Close() }()
	return c.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}

// tlsRotation: the TLS Secret is replaced (as cert-manager renews it) and every gateway Pod serves
// the new certificate without a restart.
func (e *env) tlsRotation(t *testing.T) {
	ctx := t.Context()
	ips := e.gatewayPodIPs(ctx, t)
	restarts := e.gatewayRestarts(ctx, t)
	first := map[string]string{}
	for _, ip := range ips {
		s, err := servedSerial(ctx, ip, 8443)
		if err != nil {
			t.Fatalf("gateway %s: %v", ip, err)
		}
		first[ip] = s
	}
	if err := e.writeTLSSecret(ctx, tlsCA); err != nil {
		t.Fatal(err)
	}
	// The kubelet refreshes a Secret volume on its sync (up to about a minute plus its cache TTL);
	// certwatcher then picks the files up.
	deadline := time.Now().Add(4 * time.Minute)
	for _, ip := range ips {
		for {
			s, err := servedSerial(ctx, ip, 8443)
			if err == nil && s != first[ip] {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("gateway %s still serves serial %s (err %v) after the Secret changed", ip, first[ip], err)
			}
			time.Sleep(2 * time.Second)
		}
	}
	if got := e.gatewayRestarts(ctx, t); got != restarts {
		t.Errorf("gateway containers restarted (%d, before %d): rotation must not need a restart", got, restarts)
	}
}

func (e *env) gatewayRestarts(ctx context.Context, t *testing.T) int32 {
	pods, err := e.cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=gateway"})
	if err != nil {
		t.Fatal(err)
	}
	var n int32
	for _, p := range pods.Items {
		for _, s := range p.Status.ContainerStatuses {
			n += s.RestartCount
		}
	}
	return n
}

// uninstall: `helm uninstall` leaves only what docs/install.md says stays (the CRDs, and the
// namespace the user created).
func (e *env) uninstall(t *testing.T) {
	e.must(t, e.helm, "uninstall", release, "--namespace", namespace, "--wait", "--timeout", "3m")
	// helm --wait does not wait for the Pods of a deleted Deployment; the garbage collector and
	// the kubelet remove them.
	e.waitNoPods(t)
	out := e.must(t, e.kubectl, "get", "all,serviceaccounts,roles,rolebindings,configmaps,secrets,leases,networkpolicies,poddisruptionbudgets",
		"-n", namespace, "-l", "app.kubernetes.io/instance="+release, "-o", "name")
	if strings.TrimSpace(out) != "" {
		t.Errorf("objects of the release left in %s:\n%s", namespace, out)
	}
	out = e.must(t, e.kubectl, "get", "clusterroles,clusterrolebindings,validatingadmissionpolicies,validatingadmissionpolicybindings",
		"-l", "app.kubernetes.io/instance="+release, "-o", "name")
	if strings.TrimSpace(out) != "" {
		t.Errorf("cluster objects of the release left:\n%s", out)
	}
	crds := e.must(t, e.kubectl, "get", "crd", "-o", "jsonpath={.items[*].metadata.name}")
	if !strings.Contains(crds, "servicedeployments.connectors.b10x.io") {
		t.Errorf("the CRDs should stay after uninstall (docs/install.md), got %q", crds)
	}
}

func (e *env) waitNoPods(t *testing.T) {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		pods, err := e.cs.CoreV1().Pods(namespace).List(t.Context(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release})
		if err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pods of the release still exist 3 minutes after helm uninstall", len(pods.Items))
		}
		time.Sleep(time.Second)
	}
}

// digestIn is the last sha256 digest in out (a sub-make also prints "Entering directory" lines).
func digestIn(out string) string {
	d := ""
	for _, f := range strings.Fields(out) {
		if strings.HasPrefix(f, "sha256:") {
			d = f
		}
	}
	return d
}

func dumpLogs(t *testing.T, n *devnode.Node) {
	ents, _ := os.ReadDir(n.LogDir())
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join(n.LogDir(), e.Name()))
		if len(b) > 3000 {
			b = b[len(b)-3000:]
		}
		t.Logf("--- %s (tail)\n%s", e.Name(), b)
	}
	cs, err := kubernetes.NewForConfig(n.Config)
	if err != nil {
		return
	}
	pods, err := cs.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, p := range pods.Items {
		st, _ := json.Marshal(p.Status.ContainerStatuses)
		t.Logf("pod %s/%s %s %s", p.Namespace, p.Name, p.Status.Phase, st)
	}
	evs, err := cs.CoreV1().Events("").List(context.Background(), metav1.ListOptions{})
	if err == nil {
		for _, ev := range evs.Items {
			if ev.Type == corev1.EventTypeWarning {
				t.Logf("event %s %s/%s %s: %s", ev.Type, ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Reason, ev.Message)
			}
		}
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
