package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/b10x/connector-mcp/internal/devcluster"
)

// Fixed facts of the demo.
const (
	namespace     = "demo"
	craneVersion  = "v0.22.1"
	provRepo      = "git+https://github.com/example/mcp-profiles"
	provRef       = "refs/heads/main"
	provRevision  = "0123abc"
	provBuilderID = "https://ci.example/quickstart"
	// logWaitTimeout bounds the wait for a started process to print what it is serving.
	logWaitTimeout = 30 * time.Second
	// stopTimeout bounds the wait for a child to exit after SIGTERM, before SIGKILL.
	stopTimeout = 15 * time.Second
)

// quickstart is the state the steps share: paths, started processes, and what earlier steps
// learnt (addresses, the pack reference, the agent's token).
type quickstart struct {
	stdout, stderr io.Writer

	root       string // repository root
	work       string // temporary work directory, removed at the end
	cacheRoot  string // CONNECTOR_MCP_CACHE
	bin        string // work/bin: binaries built from this checkout
	kubeconfig string
	kubectlBin string

	cluster *devcluster.Cluster
	procs   []*proc // background processes, stopped in reverse order
	server  *proc   // the sample MCP server (restarted by the drift step)
	manager *proc

	registry    string   // 127.0.0.1:PORT
	serverAddr  string   // 127.0.0.1:PORT of the sample MCP server
	packRef     string   // REGISTRY/demo/weather@sha256:...
	profile     string   // work/profile.yaml, the reviewed profile
	operations  []string // the reviewed operationRefs, in profile order
	forecastOp  string   // the operationRef mapped to get_forecast
	gatewayAddr string
	agentToken  string
	// gateway is the gateway process; lastRequestID the request id of the agent's last call.
	gateway       *proc
	lastRequestID string
}

// step is one stage of the story.
type step struct {
	name string
	run  func(context.Context) error
}

func newQuickstart(stdout, stderr io.Writer) (*quickstart, error) {
	root, err := devcluster.RepoRoot()
	if err != nil {
		return nil, err
	}
	cache, err := devcluster.CacheRoot()
	if err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp(os.Getenv("TMPDIR"), "connector-mcp-quickstart.")
	if err != nil {
		return nil, fmt.Errorf("work directory: %w", err)
	}
	return &quickstart{
		stdout: stdout, stderr: stderr, root: root, work: work, cacheRoot: cache,
		bin: filepath.Join(work, "bin"), kubeconfig: filepath.Join(work, "kubeconfig"),
	}, nil
}

// runSteps runs the steps in order and stops at the first failure or when ctx ends.
func (q *quickstart) runSteps(ctx context.Context) error {
	for _, s := range q.steps() {
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		if err := s.run(ctx); err != nil {
			if ctx.Err() == nil {
				q.log(fmt.Sprintf("Step %q failed: %v", s.name, err))
			}
			return err
		}
	}
	return nil
}

// keep leaves everything running until Ctrl-C (QUICKSTART_KEEP=1).
func (q *quickstart) keep(ctx context.Context) error {
	q.log(fmt.Sprintf("Everything is running; use: %s --kubeconfig %s -n %s ...  (Ctrl-C to stop)", q.kubectlBin, q.kubeconfig, namespace))
	<-ctx.Done()
	return context.Cause(ctx)
}

// cleanup stops every process started (the control plane last), shows the manager's last log
// lines after a failure, and removes the work directory.
func (q *quickstart) cleanup(code int) {
	for i := len(q.procs) - 1; i >= 0; i-- {
		q.procs[i].stop()
	}
	if q.cluster != nil {
		q.log("Stopping the control plane")
		fmt.Fprintln(q.stderr, "devcluster: Stopping the control plane")
		if err := q.cluster.Stop(); err != nil {
			fmt.Fprintf(q.stderr, "devcluster: %v\n", err)
		}
	}
	if code == exitFailed && q.manager != nil {
		q.log("Last manager log lines:")
		_, _ = io.WriteString(q.stderr, lastLines(q.manager.out.String(), 20))
	}
	_ = os.RemoveAll(q.work)
}

// log prints a headline to stderr.
func (q *quickstart) log(msg string) { fmt.Fprintf(q.stderr, "\n\033[1m[quickstart] %s\033[0m\n", msg) }

// showCommand prints the command a step runs, dimmed, to stderr.
func (q *quickstart) showCommand(cmd string) { fmt.Fprintf(q.stderr, "\033[2m  $ %s\033[0m\n", cmd) }

// info prints an indented detail line to stderr.
func (q *quickstart) info(format string, args ...any) {
	fmt.Fprintf(q.stderr, "  "+format+"\n", args...)
}

// command builds a foreground command run from the repository root; its output goes where the
// caller says.
func (q *quickstart) command(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = q.root
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// runCmd runs a foreground command with stdout and stderr to the terminal.
func (q *quickstart) runCmd(ctx context.Context, name string, args ...string) error {
	return wrapRun(q.command(ctx, nil, q.stdout, q.stderr, name, args...).Run(), name)
}

// output runs a foreground command and returns its stdout (stderr to the terminal).
func (q *quickstart) output(ctx context.Context, name string, args ...string) (string, error) {
	var out bytes.Buffer
	err := q.command(ctx, nil, &out, q.stderr, name, args...).Run()
	return out.String(), wrapRun(err, name)
}

func wrapRun(err error, name string) error {
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(name), err)
	}
	return nil
}

// kubectl runs kubectl against the local control plane, output to the terminal.
func (q *quickstart) kubectl(ctx context.Context, args ...string) error {
	return q.runCmd(ctx, q.kubectlBin, append([]string{"--kubeconfig", q.kubeconfig}, args...)...)
}

// kubectlApply applies manifests given on stdin (strict validation), output to the terminal.
func (q *quickstart) kubectlApply(ctx context.Context, manifest string, extra ...string) error {
	args := append([]string{"--kubeconfig", q.kubeconfig}, extra...)
	args = append(args, "apply", "--validate=strict", "-f", "-")
	return wrapRun(q.command(ctx, strings.NewReader(manifest), q.stdout, q.stderr, q.kubectlBin, args...).Run(), "kubectl")
}

// kubectlOutput runs kubectl and returns its stdout.
func (q *quickstart) kubectlOutput(ctx context.Context, args ...string) (string, error) {
	return q.output(ctx, q.kubectlBin, append([]string{"--kubeconfig", q.kubeconfig}, args...)...)
}

// mcpctl shows and runs mcpctl; stdout is returned, stderr goes to the terminal.
func (q *quickstart) mcpctl(ctx context.Context, args ...string) (string, error) {
	q.showCommand("mcpctl " + strings.Join(args, " "))
	return q.output(ctx, filepath.Join(q.bin, "mcpctl"), args...)
}

// proc is a background process whose combined output goes to a log file and to a watched buffer.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *watchedLog
	done chan struct{}
	err  error // Wait's result, set before done closes
}

// start launches a background process with its output in work/<logName>; it is stopped by cleanup
// (or earlier by stop).
func (q *quickstart) start(logName, name string, args ...string) (*proc, error) {
	f, err := os.Create(filepath.Join(q.work, logName))
	if err != nil {
		return nil, err
	}
	w := newWatchedLog(f)
	// Not bound to the run's context: cleanup stops it with SIGTERM (and waits), after the steps.
	cmd := exec.CommandContext(context.Background(), name, args...)
	cmd.Dir = q.root
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("start %s: %w", filepath.Base(name), err)
	}
	p := &proc{name: filepath.Base(name), cmd: cmd, out: w, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	q.procs = append(q.procs, p)
	return p, nil
}

// stop sends SIGTERM and waits for the process to exit (SIGKILL after stopTimeout).
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopTimeout):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// waitFor waits until the process's output matches re and returns the first match; it fails when
// the process exits first, after logWaitTimeout, or when ctx ends.
func (q *quickstart) waitFor(ctx context.Context, p *proc, re *regexp.Regexp) (string, error) {
	timeout := time.NewTimer(logWaitTimeout)
	defer timeout.Stop()
	for {
		changed := p.out.changed()
		if m := re.FindString(p.out.String()); m != "" {
			return m, nil
		}
		select {
		case <-changed:
		case <-p.done:
			if m := re.FindString(p.out.String()); m != "" {
				return m, nil
			}
			q.log(fmt.Sprintf("%s exited before printing '%s'", p.name, re))
			_, _ = io.WriteString(q.stderr, p.out.String())
			return "", fmt.Errorf("%s exited: %w", p.name, p.err)
		case <-timeout.C:
			q.log(fmt.Sprintf("Timed out waiting for '%s' in %s", re, p.name))
			_, _ = io.WriteString(q.stderr, p.out.String())
			return "", fmt.Errorf("timed out waiting for %s", p.name)
		case <-ctx.Done():
			return "", context.Cause(ctx)
		}
	}
}

// watchedLog is a log file that also keeps its content in memory and signals each write.
type watchedLog struct {
	mu     sync.Mutex
	file   io.Writer
	buf    bytes.Buffer
	notify chan struct{}
}

func newWatchedLog(file io.Writer) *watchedLog {
	return &watchedLog{file: file, notify: make(chan struct{})}
}

// Write appends p to the file and the buffer and wakes the waiters.
func (w *watchedLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	close(w.notify)
	w.notify = make(chan struct{})
	return w.file.Write(p)
}

// String returns everything written so far.
func (w *watchedLog) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// changed returns a channel closed by the next Write.
func (w *watchedLog) changed() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.notify
}

// lastLines returns the last n lines of s, each ending in a newline.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) == 1 && lines[0] == "" {
		return ""
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n") + "\n"
}

// errUnreviewed is returned when the review leaves an effect unreviewed.
var errUnreviewed = errors.New("the review left an unreviewed effect")
