// Command node runs a real single-node Kubernetes cluster on this machine (internal/devnode) until
// interrupted, then stops it and restores the machine: `go run ./hack/node` as root, after
// `hack/control-plane.sh kube-controller-manager kube-scheduler kubelet kube-proxy` and
// hack/node-deps.sh. It prints the admin kubeconfig's path, the registry the node pulls from, the pause image
// there and the log directory, as NAME=VALUE lines.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/b10x/connector-mcp/internal/devcluster"
	"github.com/b10x/connector-mcp/internal/devnode"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if errors.Is(err, devnode.ErrMissingBinary) || errors.Is(err, devnode.ErrNotRoot) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	bin, err := devcluster.DefaultBinDir()
	if err != nil {
		return err
	}
	if v := os.Getenv(devcluster.AssetsEnv); v != "" {
		bin = v
	}
	root, err := devcluster.RepoRoot()
	if err != nil {
		return err
	}
	n, err := devnode.Start(ctx, devnode.Options{BinDir: bin, ModuleDir: root, Log: os.Stderr})
	if err != nil {
		return err
	}
	fmt.Printf("KUBECONFIG=%s\nREGISTRY=%s\nPAUSE_IMAGE=%s\nLOGS=%s\n", n.Kubeconfig, n.Registry, n.PauseImage, n.LogDir())
	fmt.Fprintln(os.Stderr, "[devnode] Ready; Ctrl-C to stop and restore the machine")
	<-ctx.Done()
	return n.Stop()
}
