// Command mcpctl is the standalone consumer of connector-mcp: it discovers and snapshots MCP
// servers, calls tools, builds, signs and verifies profile packs, and keeps local credentials in
// XDG custody.
//
// Output contract (docs/cli.md): machine-readable JSON on stdout, human progress on stderr, named
// refusals as "refused: <name>" on stderr. Exit codes: 0 success, 1 failure, 2 usage, 3 refusal,
// 4 drift.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// Exit codes of mcpctl, stable for scripts.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
	exitRefused = 3
	exitDrift   = 4
)

// verb is one mcpctl sub-command. Each verb lives in its own file and registers itself in init.
type verb struct {
	// summary is the one-line help shown by "mcpctl help".
	summary string
	// run executes the verb with the arguments after the verb name.
	run func(ctx context.Context, env *cliEnv, args []string) error
}

// verbs holds every registered verb by name (e.g. "discover", "pack").
var verbs = map[string]verb{}

// register adds a verb; called from init functions of the verb files.
func register(name string, v verb) {
	if _, dup := verbs[name]; dup {
		panic("mcpctl: verb registered twice: " + name)
	}
	verbs[name] = v
}

// cliEnv carries the process streams so verbs are testable in process.
type cliEnv struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
}

// usageError marks a command-line mistake (exit 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// usagef returns a usage error (exit code 2).
func usagef(format string, a ...any) error { return &usageError{msg: fmt.Sprintf(format, a...)} }

// driftError marks a detected drift (exit 4); the report has already been printed.
type driftError struct{ msg string }

func (e *driftError) Error() string { return e.msg }

// exitError carries an explicit exit code whose explanation has already been printed
// (e.g. a tool result with isError, printed in full, exits 1).
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// refusal is implemented by every named refusal of the project's packages
// (mcpclient, egress, ocipack): a stable, secret-free name such as "frame_too_large".
type refusal interface {
	error
	Refusal() string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, &cliEnv{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}, os.Args[1:])
	stop()
	os.Exit(code)
}

// run dispatches to a verb and maps its error to an exit code and a stderr line.
func run(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		printHelp(env.stderr)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	v, ok := verbs[args[0]]
	if !ok {
		fmt.Fprintf(env.stderr, "mcpctl: unknown command %q (see mcpctl help)\n", args[0])
		return exitUsage
	}
	return exitCode(env.stderr, v.run(ctx, env, args[1:]))
}

// exitCode prints err in the CLI's contract form and returns the exit code for it.
func exitCode(stderr io.Writer, err error) int {
	if err == nil {
		return exitOK
	}
	var (
		u *usageError
		r refusal
		d *driftError
		x *exitError
	)
	switch {
	case errors.As(err, &u):
		fmt.Fprintf(stderr, "mcpctl: %s\n", u.msg)
		return exitUsage
	case errors.As(err, &r):
		fmt.Fprintf(stderr, "refused: %s\n", r.Refusal())
		fmt.Fprintf(stderr, "mcpctl: %v\n", err)
		return exitRefused
	case errors.As(err, &d):
		fmt.Fprintf(stderr, "drift: %s\n", d.msg)
		return exitDrift
	case errors.As(err, &x):
		if x.msg != "" {
			fmt.Fprintf(stderr, "mcpctl: %s\n", x.msg)
		}
		return x.code
	default:
		fmt.Fprintf(stderr, "mcpctl: %v\n", err)
		return exitFailure
	}
}

func printHelp(w io.Writer) {
	fmt.Fprintln(w, "Usage: mcpctl <command> [flags] [-- CMD ARGS...]")
	fmt.Fprintln(w, "\nCommands:")
	names := make([]string, 0, len(verbs))
	for n := range verbs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, verbs[n].summary)
	}
	fmt.Fprintln(w, "\nExit codes: 0 ok, 1 failure, 2 usage, 3 refused, 4 drift.")
}
