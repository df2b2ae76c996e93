package devnode

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// GlobalSysctls are the machine-wide settings a node's components are known to change: the
// kubelet sets the vm and kernel ones (unless protectKernelDefaults), kube-proxy the conntrack
// table size, the bridge plugin forwarding. Those under net/ are per network namespace, and the
// node's live in its own; they are recorded on the machine's namespace to prove it.
var GlobalSysctls = []string{
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/panic",
	"kernel/panic_on_oops",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
	"net/netfilter/nf_conntrack_max",
	"net/ipv4/ip_forward",
	"net/ipv4/conf/all/route_localnet",
	"net/bridge/bridge-nf-call-iptables",
}

// GlobalPaths are the well-known places a kubelet, containerd or a CNI plugin writes to when not
// told otherwise. The node tells each of them to use its work directory; any of these it creates
// anyway is removed at Stop.
var GlobalPaths = []string{
	"/run/containerd", "/var/run/containerd", "/opt/containerd", "/var/lib/containerd",
	"/run/netns", "/var/run/netns", "/var/lib/cni", "/etc/cni", "/opt/cni",
	"/var/lib/kubelet", "/var/log/pods", "/var/log/containers", "/etc/kubernetes",
	"/run/runc", "/run/containerd-shim", "/var/lib/kube-proxy", "/run/kubernetes", "/var/run/kubernetes",
}

// Machine is what a node could change on this machine, read at one moment: the settings in
// GlobalSysctls, the mount table, the machine's network links and firewall rules, the top-level
// cgroups of every controller, which of GlobalPaths exist, and the node's processes. Two readings
// taken before a node starts and after it stops are equal (Diff is empty) when the node cleaned up.
type Machine struct {
	Sysctls   map[string]string
	Mounts    []string
	Links     []string
	Firewall  string
	Cgroups   []string
	Paths     []string
	Processes []string
}

// nodeProcessNames are the executables a node starts; any left running after Stop is a leak.
var nodeProcessNames = []string{
	"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy",
	"containerd", "containerd-shim", "containerd-shim-runc-v2", "runc",
}

// ReadMachine reads the machine's state.
func ReadMachine(ctx context.Context) (*Machine, error) {
	m := &Machine{Sysctls: map[string]string{}}
	for _, k := range GlobalSysctls {
		b, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			m.Sysctls[k] = "absent"
			continue
		}
		m.Sysctls[k] = strings.TrimSpace(string(b))
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	for line := range strings.Lines(string(mi)) {
		f := strings.Fields(line)
		if len(f) > 4 {
			m.Mounts = append(m.Mounts, f[4])
		}
	}
	slices.Sort(m.Mounts)
	links, err := os.ReadDir("/sys/class/net")
	if err != nil {
		return nil, err
	}
	for _, l := range links {
		m.Links = append(m.Links, l.Name())
	}
	m.Firewall = firewall(ctx)
	ctrls, _ := os.ReadDir("/sys/fs/cgroup")
	for _, c := range ctrls {
		subs, err := os.ReadDir(filepath.Join("/sys/fs/cgroup", c.Name()))
		if err != nil {
			continue
		}
		for _, s := range subs {
			if s.IsDir() {
				m.Cgroups = append(m.Cgroups, c.Name()+"/"+s.Name())
			}
		}
	}
	for _, p := range GlobalPaths {
		if _, err := os.Lstat(p); err == nil {
			m.Paths = append(m.Paths, p)
		}
	}
	m.Processes = nodeProcesses()
	return m, nil
}

var counters = regexp.MustCompile(`\[[0-9]+:[0-9]+\]`)

// firewall is the machine namespace's iptables and nftables rules without counters and comments;
// empty where the tools are missing.
func firewall(ctx context.Context) string {
	var b strings.Builder
	for _, args := range [][]string{{"iptables-save"}, {"ip6tables-save"}, {"nft", "list", "ruleset"}} {
		out, err := exec.CommandContext(ctx, args[0], args[1:]...).Output()
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(out)) {
			if strings.HasPrefix(line, "#") {
				continue
			}
			b.WriteString(counters.ReplaceAllString(line, "[0:0]"))
		}
	}
	return b.String()
}

// nodeProcesses lists "PID NAME" of running processes whose executable is one of
// nodeProcessNames and that run outside this process's network namespace: every node component
// runs inside the node's, so an etcd or kube-apiserver of another test on this machine (an envtest
// control plane, in the machine's namespace) is not taken for one the node left behind.
func nodeProcesses() []string {
	var out []string
	self, _ := os.Readlink("/proc/self/ns/net")
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil {
			continue
		}
		name := strings.TrimSpace(string(comm))
		if ns, err := os.Readlink(filepath.Join("/proc", e.Name(), "ns", "net")); err == nil && ns == self {
			continue
		}
		if slices.Contains(nodeProcessNames, name) || strings.HasPrefix(name, "containerd-shim") {
			out = append(out, e.Name()+" "+name)
		}
	}
	return out
}

// Diff lists, one line each, what differs between two readings; empty when they are equal.
func (m *Machine) Diff(after *Machine) []string {
	var d []string
	for _, k := range slices.Sorted(maps.Keys(m.Sysctls)) {
		if m.Sysctls[k] != after.Sysctls[k] {
			d = append(d, fmt.Sprintf("sysctl %s: %s, now %s", k, m.Sysctls[k], after.Sysctls[k]))
		}
	}
	d = append(d, setDiff("mount", m.Mounts, after.Mounts)...)
	d = append(d, setDiff("link", m.Links, after.Links)...)
	d = append(d, setDiff("cgroup", m.Cgroups, after.Cgroups)...)
	d = append(d, setDiff("path", m.Paths, after.Paths)...)
	d = append(d, setDiff("process", m.Processes, after.Processes)...)
	if m.Firewall != after.Firewall {
		d = append(d, "firewall rules changed:\n"+lineDiff(m.Firewall, after.Firewall))
	}
	return d
}

func setDiff(kind string, before, after []string) []string {
	count := map[string]int{}
	for _, s := range before {
		count[s]++
	}
	for _, s := range after {
		count[s]--
	}
	var d []string
	for _, k := range slices.Sorted(maps.Keys(count)) {
		switch n := count[k]; {
		case n < 0:
			d = append(d, fmt.Sprintf("%s added: %s", kind, k))
		case n > 0:
			d = append(d, fmt.Sprintf("%s gone: %s", kind, k))
		}
	}
	return d
}

func lineDiff(a, b string) string {
	set := func(s string) map[string]bool {
		m := map[string]bool{}
		sc := bufio.NewScanner(bytes.NewReader([]byte(s)))
		for sc.Scan() {
			m[sc.Text()] = true
		}
		return m
	}
	as, bs := set(a), set(b)
	var out []string
	for l := range bs {
		if !as[l] {
			out = append(out, "+ "+l)
		}
	}
	for l := range as {
		if !bs[l] {
			out = append(out, "- "+l)
		}
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}
