// Command mcpctl is the standalone consumer of connector-mcp: it discovers and snapshots MCP
// servers, calls tools, builds, signs and verifies profile packs, and keeps local credentials in
// XDG custody.
//
// Output contract (docs/cli.md): machine-readable JSON on stdout, human progress on stderr, named
// refusals as "refused: <name>" on stderr. Exit codes: 0 success, 1 failure, 2 usage, 3 refusal,
// 4 drift.
//
// Installed as "kubectl-mcp" it is a kubectl plugin: "kubectl mcp snapshot ..." runs it, and its
// usage lines say "kubectl mcp".
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/b10x/connector-mcp/refusal"
)

// Exit codes of mcpctl, stable for scripts.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
	exitRefused = 3
	exitDrift   = 4
)

// Program names: the standalone name, and the kubectl plugin's binary and display names.
const (
	programName       = "mcpctl"
	pluginBinaryName  = "kubectl-mcp"
	pluginDisplayName = "kubectl mcp"
)

// commands holds the constructor of every top-level command. Each command lives in its own file
// and registers its constructor in init; run builds a fresh command tree per invocation, so flag
// values never leak from one run to the next.
var commands []func(env *cliEnv) *cobra.Command

// register adds the constructor of a top-level command; called from init functions.
func register(newCmd func(env *cliEnv) *cobra.Command) {
	commands = append(commands, newCmd)
}

// cliEnv carries the process streams so verbs are testable in process.
type cliEnv struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
	// name is the name the binary was invoked as (os.Args[0]'s base name); "kubectl-mcp" makes
	// usage lines say "kubectl mcp". Empty means "mcpctl".
	name string
}

// displayName is the command path shown in usage lines: "mcpctl", or "kubectl mcp" when the
// binary was invoked as the kubectl plugin.
func (e *cliEnv) displayName() string {
	if strings.TrimSuffix(e.name, ".exe") == pluginBinaryName {
		return pluginDisplayName
	}
	return programName
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

// verbError wraps the error a command's own action returned, so run can tell it from cobra's
// errors about the command line (unknown command, bad flag), which are usage errors.
type verbError struct{ err error }

func (e *verbError) Error() string { return e.err.Error() }
func (e *verbError) Unwrap() error { return e.err }

// action adapts a command's action to cobra: its error is marked as the verb's own.
func action(fn func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := fn(cmd, args); err != nil {
			return &verbError{err: err}
		}
		return nil
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	env := &cliEnv{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv, name: filepath.Base(os.Args[0])}
	code := run(ctx, env, os.Args[1:])
	stop()
	os.Exit(code)
}

// newRootCmd builds the command tree for one invocation.
func newRootCmd(env *cliEnv) *cobra.Command {
	root := &cobra.Command{
		Use:   programName,
		Short: "Discover, snapshot and call MCP servers; build, sign and verify profile packs",
		Long: `mcpctl is the standalone consumer of connector-mcp.

Machine-readable JSON goes to stdout, human progress to stderr. A named refusal prints
"refused: <name>" on stderr.

Exit codes: 0 ok, 1 failure, 2 usage, 3 refused, 4 drift.`,
		Args:          cobra.ArbitraryArgs,
		SilenceErrors: true,
		// Suggest a command within two edits ("snapshto" -> "snapshot").
		SuggestionsMinimumDistance: 2,
		SilenceUsage:               true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				cmd.SetOut(env.stderr)
				_ = cmd.Help()
				return &exitError{code: exitUsage}
			}
			hint := ""
			if sug := cmd.SuggestionsFor(args[0]); len(sug) > 0 {
				hint = fmt.Sprintf("; did you mean %q?", sug[0])
			}
			return usagef("unknown command %q%s (see %s --help)", args[0], hint, env.displayName())
		},
	}
	// --version prints what "mcpctl version" prints.
	root.Version = cliVersion()
	root.SetVersionTemplate(versionLine())
	if d := env.displayName(); d != programName {
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: d}
	}
	root.SetIn(env.stdin)
	root.SetOut(env.stdout)
	root.SetErr(env.stderr)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usagef("%v (see %s --help)", err, cmd.CommandPath())
	})
	for _, newCmd := range commands {
		root.AddCommand(newCmd(env))
	}
	attachExamples(root, env.displayName())
	root.SetHelpCommand(&cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		Args:  cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err != nil || len(rest) > 0 {
				return usagef("unknown help topic %q (see %s --help)", strings.Join(args, " "), env.displayName())
			}
			cmd.InitDefaultHelpFlag()
			return cmd.Help()
		},
	})
	// cobra's own "completion bash|zsh|fish|powershell"; like the other groups, it is a usage
	// error without a shell or with an unknown one.
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.Args = cobra.ArbitraryArgs
			c.RunE = groupRunE
		}
	}
	return root
}

// run executes one command line and maps its outcome to an exit code and a stderr line.
func run(ctx context.Context, env *cliEnv, args []string) int {
	root := newRootCmd(env)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	var ve *verbError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ve):
		return exitCode(env.stderr, ve.err)
	default:
		var u *usageError
		var x *exitError
		if errors.As(err, &u) || errors.As(err, &x) {
			return exitCode(env.stderr, err)
		}
		// cobra's own command-line errors (unknown command, bad arguments) are usage errors.
		return exitCode(env.stderr, usagef("%v", err))
	}
}

// exitCode prints err in the CLI's contract form and returns the exit code for it.
func exitCode(stderr io.Writer, err error) int {
	if err == nil {
		return exitOK
	}
	var (
		u *usageError
		r refusal.Named
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

// usageArgs returns a usage error naming the command's usage line unless args has between min
// and max elements (max < 0: no upper bound).
func usageArgs(cmd *cobra.Command, args []string, minN, maxN int) error {
	if len(args) < minN || (maxN >= 0 && len(args) > maxN) {
		return usagef("usage: %s", cmd.UseLine())
	}
	return nil
}

// groupCmd returns a command that only groups sub-commands ("pack", "profile", "auth"): run
// without one, or with an unknown one, it is a usage error (exit 2).
func groupCmd(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{Use: use, Short: short, Args: cobra.ArbitraryArgs, RunE: groupRunE}
	c.AddCommand(subs...)
	return c
}

// groupRunE is the action of a command that only groups sub-commands: a usage error.
func groupRunE(cmd *cobra.Command, args []string) error {
	var names []string
	for _, s := range cmd.Commands() {
		if s.IsAvailableCommand() {
			names = append(names, s.Name())
		}
	}
	if len(args) == 0 {
		return usagef("%s: name a command: %s (see %s --help)", cmd.CommandPath(), strings.Join(names, ", "), cmd.CommandPath())
	}
	return usagef("unknown %s command %q: want %s (see %s --help)", cmd.Name(), args[0], strings.Join(names, ", "), cmd.CommandPath())
}

// markRequired marks flags of cmd as required: a command line without one of them is a usage
// error naming every missing flag (cobra's `required flag(s) "x" not set`).
func markRequired(cmd *cobra.Command, names ...string) {
	for _, n := range names {
		if err := cmd.MarkFlagRequired(n); err != nil {
			panic(fmt.Sprintf("mcpctl: %s: no flag %q to require", cmd.Name(), n))
		}
	}
}

// versionLine is the one line "mcpctl --version" prints: the version, the commit, the go-sdk and
// the Go toolchain.
func versionLine() string {
	v := versionInfo()
	return fmt.Sprintf("mcpctl %s (commit %s, go-sdk %s, %s)\n", v.Version, v.Commit, v.GoSDK, v.Go)
}
