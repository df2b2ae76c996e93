// Command devcluster starts a local Kubernetes control plane (etcd + kube-apiserver built by
// hack/control-plane.sh) with the project's CRDs installed, writes an admin kubeconfig, and runs
// until Ctrl-C or SIGTERM, then stops the control plane and removes its data.
//
// Usage: go run ./hack/devcluster --write-kubeconfig /tmp/connector-mcp.kubeconfig
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/b10x/connector-mcp/internal/devcluster"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "devcluster: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	// An own FlagSet: controller-runtime registers --kubeconfig on the global one.
	fs := flag.NewFlagSet("devcluster", flag.ExitOnError)
	kubeconfig := fs.String("write-kubeconfig", "connector-mcp.kubeconfig", "where to write the admin kubeconfig (0600)")
	crdDir := fs.String("crd-dir", "", "directory of CRD manifests to install (default: <repo>/config/crd/bases)")
	verbose := fs.Bool("v", false, "show etcd and kube-apiserver output")
	_ = fs.Parse(os.Args[1:])

	opts := devcluster.Options{AttachOutput: *verbose}
	if *crdDir != "" {
		opts.CRDDirs = []string{*crdDir}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Ctrl-C on `make quickstart | tee log` ends tee too; a write to the dead pipe must not kill
	// this process before it has stopped etcd and kube-apiserver (envtest starts them in their
	// own process group, so nothing else stops them).
	signal.Ignore(syscall.SIGPIPE)

	fmt.Fprintln(os.Stderr, "devcluster: Starting etcd and kube-apiserver")
	c, err := devcluster.Start(opts)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(os.Stderr, "devcluster: Stopping the control plane")
		if err := c.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "devcluster: %v\n", err)
		}
	}()
	if err := c.WriteKubeconfig(*kubeconfig); err != nil {
		return err
	}
	defer func() { _ = os.Remove(*kubeconfig) }()
	fmt.Fprintf(os.Stderr, "devcluster: Ready: %s (binaries from %s); Ctrl-C to stop\n", c.Config.Host, c.BinDir)
	<-ctx.Done()
	return nil
}
