//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/b10x/connector-mcp/internal/devcluster"
	"github.com/b10x/connector-mcp/internal/devnode"
)

// TestStaleNodeSweep: a node whose process is killed with SIGKILL (a crashed or killed test run)
// while a Pod runs on it leaves containers and their shim, mounts, cgroups, its link and changed sysctls behind; while it runs, a second
// node on the machine is refused (ErrBusy) instead of colliding with it; once its process is gone,
// the next Start sweeps what it left and starts, and its Stop leaves the machine as it was before
// the killed node started.
func TestStaleNodeSweep(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root, bin := repoAndBins(t)
	before, err := devnode.ReadMachine(ctx)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(t.TempDir(), "node")
	build := exec.CommandContext(ctx, "go", "build", "-o", exe, "./hack/node")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build hack/node: %v\n%s", err, out)
	}
	first := exec.CommandContext(ctx, exe)
	first.Dir = root
	first.Env = append(os.Environ(), devcluster.AssetsEnv+"="+bin)
	stderr, err := first.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := first.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "Ready;") {
				ready <- true
			}
		}
		close(ready)
	}()
	select {
	case ok := <-ready:
		if !ok {
			_ = first.Wait()
			t.Fatal("hack/node ended before its node was Ready")
		}
	case <-time.After(5 * time.Minute):
		_ = first.Process.Kill()
		t.Fatal("hack/node's node not Ready within 5 minutes")
	}
	// A Pod on the killed node: its containers and their shim outlive the node's process.
	printed := map[string]string{}
	for sc := bufio.NewScanner(stdout); printed["LOGS"] == "" && sc.Scan(); {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			printed[k] = v
		}
	}
	kubectl := func(args ...string) {
		t.Helper()
		c := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", printed["KUBECONFIG"]}, args...)...)
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	kubectl("run", "left-behind", "--image="+printed["PAUSE_IMAGE"], "--restart=Never")
	kubectl("wait", "--for=condition=Ready", "pod/left-behind", "--timeout=2m")
	if _, err := devnode.Start(ctx, devnode.Options{BinDir: bin, ModuleDir: root}); !errors.Is(err, devnode.ErrBusy) {
		t.Errorf("a second node while one runs: %v, want ErrBusy", err)
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	if d := before.Diff(mustRead(ctx, t)); len(d) == 0 {
		t.Fatal("the killed node left nothing behind: the sweep below would prove nothing")
	}
	n, err := devnode.Start(ctx, devnode.Options{BinDir: bin, ModuleDir: root, Log: testWriter{t}})
	if err != nil {
		t.Fatalf("Start after a killed node: %v", err)
	}
	if err := n.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if d := before.Diff(mustRead(ctx, t)); len(d) > 0 {
		t.Errorf("after the sweep and a clean run the machine is not as before the killed node:\n  %s", strings.Join(d, "\n  "))
	}
}

func mustRead(ctx context.Context, t *testing.T) *devnode.Machine {
	t.Helper()
	m, err := devnode.ReadMachine(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
