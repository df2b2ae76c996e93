// Command quickstart runs the whole connector-mcp story on one machine, then cleans everything up
// (on success, failure, Ctrl-C or SIGTERM):
//
//  1. a local control plane (etcd + kube-apiserver built from source by hack/control-plane.sh,
//     started in process by internal/devcluster, CRDs installed);
//  2. a local OCI registry (crane registry serve), a sample MCP server, a fresh signing key;
//  3. review: mcpctl snapshot -> profile init -> effects filled in -> pack push -> pack sign (with
//     SLSA provenance naming the reviewed branch);
//  4. the manager, with provenance required; a cluster admin's McpTrustPolicy granting the team's
//     key and repository to the demo namespace (docs/trust-policy.md); the McpServiceProfile (pack
//     by digest) and the ServiceDeployment applied with kubectl;
//  5. wait for Ready and show `kubectl get`;
//  6. an agent with a ServiceAccount token calls a reviewed operation through the gateway;
//  7. one tool changes on the live server: the deployment refuses, with the diff in status, and
//     the agent's next call is refused.
//
// Usage: make quickstart (builds this command into bin/ and runs it from the repository root).
// Environment: QUICKSTART_KEEP=1 keeps everything running at the end until Ctrl-C;
// CONNECTOR_MCP_CACHE is the cache root for the control-plane binaries and tools.
//
// Exit status: 0 when the story ran to the end, 1 when a step failed (the manager's last log lines
// are shown), 130 after Ctrl-C (SIGINT), 143 after SIGTERM.
//
// Each step is one method of quickstart, listed in order by (*quickstart).steps; to extend the
// story, write a method and add its row there.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// Exit statuses of the command.
const (
	exitOK        = 0
	exitFailed    = 1
	exitInterrupt = 130 // 128 + SIGINT, as a shell reports it
	exitTerminate = 143 // 128 + SIGTERM
)

func main() {
	os.Exit(run(os.Stdout, os.Stderr))
}

// run executes every step, then cleans up, and returns the exit status.
func run(stdout, stderr io.Writer) int {
	// Output may go to a pipe that Ctrl-C already closed (make quickstart | tee log): a write to it
	// must fail, not kill this process before the control plane and every child are stopped.
	signal.Ignore(syscall.SIGPIPE)
	// envtest logs through controller-runtime; the story prints its own progress.
	ctrllog.SetLogger(logr.Discard())
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		for s := range sigs {
			cancel(signalError{s})
		}
	}()

	q, err := newQuickstart(stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "quickstart: %v\n", err)
		return exitFailed
	}
	err = q.runSteps(ctx)
	if err == nil && os.Getenv("QUICKSTART_KEEP") == "1" {
		err = q.keep(ctx)
	}
	if err == nil {
		q.log("Done: a Ready deployment called through the gateway, then a refused one with the diff. Cleaning up.")
	}
	code := exitStatus(err, context.Cause(ctx))
	q.cleanup(code)
	return code
}

// signalError is the cancellation cause when a signal stops the run.
type signalError struct{ sig os.Signal }

func (e signalError) Error() string { return "quickstart: stopped by " + e.sig.String() }

// exitStatus maps the run's outcome to the exit status a shell script would have: a signal wins
// over the error it caused.
func exitStatus(err, cause error) int {
	var s signalError
	if errors.As(cause, &s) {
		if s.sig == syscall.SIGTERM {
			return exitTerminate
		}
		return exitInterrupt
	}
	if err != nil {
		return exitFailed
	}
	return exitOK
}
