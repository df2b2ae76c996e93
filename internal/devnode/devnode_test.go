package devnode

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
)

func TestMachineDiffNamesEveryChange(t *testing.T) {
	before := &Machine{
		Sysctls: map[string]string{"vm/overcommit_memory": "0", "kernel/panic": "1"},
		Mounts:  []string{"/", "/proc"}, Links: []string{"eth0", "lo"}, Cgroups: []string{"memory/user"},
		Paths: []string{"/etc/cni"}, Firewall: "-A INPUT -j ACCEPT\n",
	}
	same := &Machine{
		Sysctls: map[string]string{"vm/overcommit_memory": "0", "kernel/panic": "1"},
		Mounts:  []string{"/", "/proc"}, Links: []string{"eth0", "lo"}, Cgroups: []string{"memory/user"},
		Paths: []string{"/etc/cni"}, Firewall: "-A INPUT -j ACCEPT\n",
	}
	if d := before.Diff(same); len(d) != 0 {
		t.Fatalf("equal readings differ: %v", d)
	}
	after := &Machine{
		Sysctls:   map[string]string{"vm/overcommit_memory": "1", "kernel/panic": "1"},
		Mounts:    []string{"/", "/proc", "/tmp/x/rootfs"},
		Links:     []string{"cmcp1", "eth0", "lo"},
		Cgroups:   []string{"memory/connector-mcp-devnode", "memory/user"},
		Firewall:  "-A INPUT -j ACCEPT\n-A FORWARD -j DROP\n",
		Processes: []string{"42 containerd-shim"},
	}
	got := strings.Join(before.Diff(after), "\n")
	for _, want := range []string{
		"sysctl vm/overcommit_memory: 0, now 1",
		"mount added: /tmp/x/rootfs",
		"link added: cmcp1",
		"cgroup added: memory/connector-mcp-devnode",
		"path gone: /etc/cni",
		"process added: 42 containerd-shim",
		"+ -A FORWARD -j DROP",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("diff lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "kernel/panic") {
		t.Errorf("an unchanged sysctl is reported:\n%s", got)
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{`/a\040b`: "/a b", "/plain": "/plain", `/t\011x`: "/t\tx"} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestStartRefusesWithoutItsBinaries(t *testing.T) {
	_, err := Start(context.Background(), Options{BinDir: t.TempDir()})
	switch {
	case os.Geteuid() != 0:
		if !errors.Is(err, ErrNotRoot) {
			t.Fatalf("Start as non-root: %v, want ErrNotRoot", err)
		}
	case !errors.Is(err, ErrMissingBinary):
		t.Fatalf("Start with an empty bin dir: %v, want ErrMissingBinary", err)
	case !strings.Contains(err.Error(), "hack/control-plane.sh kube-controller-manager kube-scheduler kubelet kube-proxy"):
		t.Fatalf("the error does not say how to build the binaries: %v", err)
	}
}

func TestFirstServiceIP(t *testing.T) {
	ip, err := firstServiceIP("10.215.0.0/24")
	if err != nil || ip != "10.215.0.1" {
		t.Fatalf("firstServiceIP = %q, %v", ip, err)
	}
	if _, err := firstServiceIP("bad"); err == nil {
		t.Fatal("a bad CIDR was accepted")
	}
}
