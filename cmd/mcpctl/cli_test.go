package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/b10x/connector-mcp/internal/devcluster"
	"github.com/b10x/connector-mcp/internal/mcptest"
)

// commandPaths returns every runnable command of the tree (sub-command names after the root),
// hidden ones excepted.
func commandPaths(c *cobra.Command, prefix []string) [][]string {
	var out [][]string
	for _, s := range c.Commands() {
		if s.Hidden {
			continue
		}
		p := append(append([]string{}, prefix...), s.Name())
		out = append(out, p)
		out = append(out, commandPaths(s, p)...)
	}
	return out
}

// TestHelpEveryCommand: "--help" of every command exits 0 and lists each of its flags; the
// same command with an unknown flag exits 2 with nothing on stdout.
func TestHelpEveryCommand(t *testing.T) {
	root := newRootCmd(&cliEnv{stdin: strings.NewReader(""), stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, getenv: func(string) string { return "" }})
	root.InitDefaultHelpCmd() // added by cobra when it executes
	root.InitDefaultCompletionCmd()
	paths := commandPaths(root, nil)
	want := map[string]bool{}
	for _, p := range paths {
		want[strings.Join(p, " ")] = true
	}
	for _, must := range []string{"discover", "snapshot", "call", "profile init", "profile check", "pack push", "pack pull",
		"pack sign", "pack verify", "login", "logout", "auth status", "version", "completion bash", "completion zsh",
		"completion fish", "completion powershell"} {
		if !want[must] {
			t.Errorf("command %q missing from the tree (have %v)", must, paths)
		}
	}
	for _, p := range paths {
		name := strings.Join(p, " ")
		t.Run(name, func(t *testing.T) {
			code, out, errOut := runServerCLI(t, nil, append(append([]string{}, p...), "--help")...)
			if code != exitOK {
				t.Fatalf("--help: exit %d, stderr %q", code, errOut)
			}
			if !strings.Contains(out, "Usage:\n  mcpctl "+name) {
				t.Fatalf("--help does not show the usage line of %q:\n%s", name, out)
			}
			cmd, _, err := root.Find(p)
			if err != nil {
				t.Fatal(err)
			}
			cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
				if !strings.Contains(out, "--"+f.Name) {
					t.Errorf("--help of %q does not list --%s", name, f.Name)
				}
			})
			// Must-fail twin: an unknown flag is a usage error.
			code, out, errOut = runServerCLI(t, nil, append(append([]string{}, p...), "--no-such-flag")...)
			if code != exitUsage || out != "" || !strings.Contains(errOut, "unknown flag: --no-such-flag") {
				t.Fatalf("unknown flag: exit %d, stdout %q, stderr %q; want exit 2", code, out, errOut)
			}
		})
	}
	// "mcpctl help VERB" is help too.
	if code, out, _ := runServerCLI(t, nil, "help", "snapshot"); code != exitOK || !strings.Contains(out, "--bearer-file") {
		t.Fatalf("help snapshot: exit %d: %s", code, out)
	}
}

// TestExitCodes runs one command per documented exit code, in process.
func TestExitCodes(t *testing.T) {
	srv := mcptest.StartHTTP(mcptest.NewServer("s", mcptest.DefaultTools()), mcptest.Modern)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	toolsA := filepath.Join(dir, "a.json")
	toolsB := filepath.Join(dir, "b.json")
	for file, content := range map[string]string{
		toolsA: `[{"name":"echo","description":"Echo.","inputSchema":{"type":"object"}}]`,
		toolsB: `[{"name":"echo","description":"Echo, changed.","inputSchema":{"type":"object"}}]`,
	} {
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A draft profile recorded from server A, for the drift case.
	code, snap, errOut := runServerCLI(t, nil, append([]string{"snapshot"}, stdioArgs("--raw", "--tools", toolsA)...)...)
	if code != 0 {
		t.Fatalf("snapshot: %s", errOut)
	}
	snapPath := filepath.Join(dir, "snap.json")
	if err := os.WriteFile(snapPath, []byte(snap), 0o600); err != nil {
		t.Fatal(err)
	}
	code, prof, errOut := runServerCLI(t, nil, "profile", "init", "--snapshot", snapPath)
	if code != 0 {
		t.Fatalf("profile init: %s", errOut)
	}
	profPath := filepath.Join(dir, "profile.yaml")
	if err := os.WriteFile(profPath, []byte(strings.ReplaceAll(prof, "effect: unreviewed", "effect: read")), 0o600); err != nil {
		t.Fatal(err)
	}
	draftPath := filepath.Join(dir, "draft.yaml")
	if err := os.WriteFile(draftPath, []byte(prof), 0o600); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name   string
		args   []string
		code   int
		stderr string // a line stderr must contain
	}{
		{"ok: version", []string{"version"}, exitOK, ""},
		{"ok: snapshot", []string{"snapshot", "--url", srv.URL}, exitOK, ""},
		{"ok: no drift", append([]string{"profile", "check", "--profile", profPath}, stdioArgs("--raw", "--tools", toolsA)...), exitOK, ""},
		{"refused: draft checked without drift", append([]string{"profile", "check", "--profile", draftPath}, stdioArgs("--raw", "--tools", toolsA)...), exitRefused, "refused: unreviewed"},
		{"refused: draft checked with drift", append([]string{"profile", "check", "--profile", draftPath}, stdioArgs("--raw", "--tools", toolsB)...), exitRefused, "refused: unreviewed"},
		{"failure: missing snapshot file", []string{"profile", "init", "--snapshot", filepath.Join(dir, "nope.json")}, exitFailure, "mcpctl: "},
		{"failure: isError result", []string{"call", "--url", srv.URL, "--tool", "fail"}, exitFailure, "mcpctl: tool returned isError"},
		{"usage: no command", nil, exitUsage, "Usage:"},
		{"usage: unknown command", []string{"frobnicate"}, exitUsage, `unknown command "frobnicate"`},
		{"usage: misspelt command", []string{"snapshto"}, exitUsage, `did you mean "snapshot"?`},
		{"usage: help for an unknown topic", []string{"help", "nope"}, exitUsage, `unknown help topic "nope"`},
		{"usage: empty --bearer-file", []string{"snapshot", "--url", srv.URL, "--bearer-file", ""}, exitUsage, "--bearer-file: name a file"},
		{"usage: unknown flag", []string{"discover", "--nope"}, exitUsage, "unknown flag: --nope"},
		{"usage: flag value", []string{"snapshot", "--max-tools", "many"}, exitUsage, "--max-tools"},
		{"usage: pack without command", []string{"pack"}, exitUsage, "name a command"},
		{"usage: unknown profile command", []string{"profile", "frob"}, exitUsage, `unknown profile command "frob"`},
		{"usage: auth without command", []string{"auth"}, exitUsage, "name a command"},
		{"usage: version takes no argument", []string{"version", "extra"}, exitUsage, ""},
		{"usage: completion for an unknown shell", []string{"completion", "tcsh"}, exitUsage, ""},
		{"usage: pack pull without reference", []string{"pack", "pull"}, exitUsage, "usage: mcpctl pack pull"},
		{"refused: file url", []string{"snapshot", "--url", "file:///etc/passwd"}, exitRefused, "refused: scheme_refused"},
		{"refused: insecure url", []string{"snapshot", "--url", "http://example.com/mcp"}, exitRefused, "refused: insecure_transport"},
		{"drift", append([]string{"profile", "check", "--profile", profPath}, stdioArgs("--raw", "--tools", toolsB)...), exitDrift, "drift: live server differs"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runServerCLI(t, nil, c.args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d; stderr %q", code, c.code, errOut)
			}
			if c.stderr != "" && !strings.Contains(errOut, c.stderr) {
				t.Fatalf("stderr %q lacks %q", errOut, c.stderr)
			}
			if (c.code == exitUsage || c.code == exitRefused) && out != "" {
				t.Fatalf("stdout not empty: %q", out)
			}
		})
	}
}

// TestNonHTTPSchemesRefused: every verb that reaches a server refuses a URL whose scheme is not
// http or https by name (exit 3); a URL without a scheme is a usage error.
func TestNonHTTPSchemesRefused(t *testing.T) {
	for _, verb := range [][]string{{"discover"}, {"snapshot"}, {"call", "--tool", "echo"}, {"profile", "check", "--profile", "unused.yaml"}} {
		for _, u := range []string{"file:///etc/passwd", "file://host/share/x", "ftp://example.com/mcp", "unix:///var/run/mcp.sock", "ws://127.0.0.1:1/mcp"} {
			if verb[0] == "profile" {
				continue // profile check reads its profile first; covered by the three others
			}
			t.Run(verb[0]+" "+u, func(t *testing.T) {
				code, out, errOut := runServerCLI(t, nil, append(append([]string{}, verb...), "--url", u)...)
				if code != exitRefused || !strings.HasPrefix(errOut, "refused: scheme_refused\n") || out != "" {
					t.Fatalf("exit %d, stdout %q, stderr %q; want exit 3 and refused: scheme_refused", code, out, errOut)
				}
			})
		}
	}
	// Must-fail twin: the same verbs with http to loopback are not refused.
	srv := mcptest.StartHTTP(mcptest.NewServer("s", mcptest.DefaultTools()), mcptest.Modern)
	t.Cleanup(srv.Close)
	for _, verb := range [][]string{{"discover"}, {"snapshot"}, {"call", "--tool", "add", "--args", `{"a":1,"b":2}`}} {
		if code, _, errOut := runServerCLI(t, nil, append(append([]string{}, verb...), "--url", srv.URL)...); code != exitOK {
			t.Fatalf("%v over http to loopback: exit %d: %s", verb, code, errOut)
		}
	}
	if code, _, errOut := runServerCLI(t, nil, "snapshot", "--url", "/relative/mcp"); code != exitUsage {
		t.Fatalf("relative URL: exit %d (%s), want 2", code, errOut)
	}
}

// TestVersion: JSON with mcpctl's version and the go-sdk version pinned in go.mod.
func TestVersion(t *testing.T) {
	code, out, errOut := runServerCLI(t, nil, "version")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var v versionOutput
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("version output is not JSON: %q", out)
	}
	pinned := goModVersion(t, goSDKModule)
	if v.GoSDK != pinned || v.Version == "" || !strings.HasPrefix(v.Go, "go1.") {
		t.Fatalf("version = %+v, want goSDK %s", v, pinned)
	}
}

// goModVersion returns the version go.mod requires for module.
func goModVersion(t *testing.T, module string) string {
	t.Helper()
	b, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(module) + `\s+(v\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("go.mod does not require %s", module)
	}
	return string(m[1])
}

// TestCompletion: a script for each supported shell on stdout, exit 0.
func TestCompletion(t *testing.T) {
	for shell, marker := range map[string]string{
		"bash": "# bash completion V2 for mcpctl", "zsh": "#compdef mcpctl",
		"fish": "# fish completion for mcpctl", "powershell": "# powershell completion for mcpctl",
	} {
		code, out, errOut := runServerCLI(t, nil, "completion", shell)
		if code != exitOK || !strings.Contains(out, marker) {
			t.Errorf("completion %s: exit %d, stderr %q, stdout starts %.80q", shell, code, errOut, out)
		}
	}
}

// TestKubectlPluginName: invoked as kubectl-mcp, usage lines say "kubectl mcp".
func TestKubectlPluginName(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"kubectl-mcp", "kubectl mcp snapshot"},
		{"mcpctl", "mcpctl snapshot"},
		{"", "mcpctl snapshot"},
	} {
		var out, errb bytes.Buffer
		env := &cliEnv{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }, name: tc.name}
		if code := run(context.Background(), env, []string{"snapshot", "--help"}); code != exitOK {
			t.Fatalf("%s: exit %d", tc.name, code)
		}
		if !strings.Contains(out.String(), "Usage:\n  "+tc.want+" ") {
			t.Fatalf("invoked as %q: help lacks %q:\n%s", tc.name, tc.want, out.String())
		}
		if tc.name == "kubectl-mcp" && strings.Contains(out.String(), "mcpctl snapshot") {
			t.Fatalf("plugin help still says mcpctl:\n%s", out.String())
		}
	}
}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// builtBinary builds mcpctl once per test binary with -ldflags -X main.version=v9.9.9-test
// -X main.commit=0123abcd and
// returns its directory, holding it as mcpctl and a symlink kubectl-mcp to it.
func builtBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "mcpctl-bin-")
		if buildErr != nil {
			return
		}
		cmd := exec.CommandContext(context.Background(), "go", "build", "-ldflags", "-X main.version=v9.9.9-test -X main.commit=0123abcd", "-o", filepath.Join(buildDir, "mcpctl"), ".")
		cmd.Stderr = os.Stderr
		if buildErr = cmd.Run(); buildErr != nil {
			return
		}
		// A symlink: the plugin name comes from argv[0], not from the file's content.
		buildErr = os.Symlink("mcpctl", filepath.Join(buildDir, "kubectl-mcp"))
	})
	if buildErr != nil {
		t.Fatalf("build mcpctl: %v", buildErr)
	}
	return buildDir
}

// TestBuiltBinary runs the real binary: ldflags version, the plugin name from argv[0], and the
// exit codes as a shell sees them.
func TestBuiltBinary(t *testing.T) {
	dir := builtBinary(t)
	exe := func(name string, args ...string) (int, string, string) {
		cmd := exec.CommandContext(t.Context(), filepath.Join(dir, name), args...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, out.String(), errb.String()
	}
	code, out, _ := exe("mcpctl", "version")
	var v versionOutput
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.Version != "v9.9.9-test" || v.Commit != "0123abcd" || v.GoSDK != goModVersion(t, goSDKModule) {
		t.Fatalf("version: exit %d, %q", code, out)
	}
	if code, out, _ := exe("mcpctl", "--version"); code != 0 || out != "mcpctl v9.9.9-test (commit 0123abcd, go-sdk "+v.GoSDK+", "+v.Go+")\n" {
		t.Fatalf("--version: exit %d, %q", code, out)
	}
	if code, out, _ := exe("kubectl-mcp", "pack", "push", "--help"); code != 0 || !strings.Contains(out, "Usage:\n  kubectl mcp pack push FILE... --to REPO") {
		t.Fatalf("kubectl-mcp help: exit %d:\n%s", code, out)
	}
	if code, _, errOut := exe("kubectl-mcp", "pack"); code != exitUsage || !strings.Contains(errOut, "kubectl mcp pack --help") {
		t.Fatalf("kubectl-mcp pack: exit %d: %s", code, errOut)
	}
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"snapshot", "--help"}, exitOK},
		{[]string{"snapshot", "--nope"}, exitUsage},
		{[]string{}, exitUsage},
		{[]string{"discover", "--url", "file:///etc/passwd"}, exitRefused},
		{[]string{"profile", "init", "--snapshot", filepath.Join(t.TempDir(), "missing.json")}, exitFailure},
	} {
		if code, _, errOut := exe("mcpctl", tc.args...); code != tc.code {
			t.Errorf("mcpctl %v: exit %d, want %d: %s", tc.args, code, tc.code, errOut)
		}
	}
}

// TestKubectlPlugin: a real kubectl (the one hack/control-plane.sh builds, v1.37) finds the
// binary installed as kubectl-mcp on PATH and runs it as "kubectl mcp", exit codes included.
// Like the envtest suites, it fails (never skips) without the control-plane binaries.
func TestKubectlPlugin(t *testing.T) {
	assets, err := devcluster.BinaryAssetsDir()
	if err != nil {
		t.Fatalf("kubectl is needed: %v", err)
	}
	kubectl := filepath.Join(assets, "kubectl")
	dir := builtBinary(t)
	home := t.TempDir()
	kc := func(args ...string) (int, string, string) {
		cmd := exec.CommandContext(t.Context(), kubectl, args...)
		cmd.Env = []string{"PATH=" + dir, "HOME=" + home, "KUBECONFIG=" + filepath.Join(home, "none")}
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, out.String(), errb.String()
	}
	if code, out, errOut := kc("plugin", "list"); code != 0 || !strings.Contains(out, filepath.Join(dir, "kubectl-mcp")) {
		t.Fatalf("kubectl plugin list: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut := kc("mcp", "version")
	var v versionOutput
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.Version != "v9.9.9-test" {
		t.Fatalf("kubectl mcp version: exit %d, %q, %s", code, out, errOut)
	}
	if code, out, _ := kc("mcp", "pack", "push", "--help"); code != 0 || !strings.Contains(out, "Usage:\n  kubectl mcp pack push FILE... --to REPO") {
		t.Fatalf("kubectl mcp pack push --help: exit %d\n%s", code, out)
	}
	if code, _, errOut := kc("mcp", "snapshot", "--url", "file:///etc/passwd"); code != exitRefused || !strings.HasPrefix(errOut, "refused: scheme_refused\n") {
		t.Fatalf("kubectl mcp snapshot file://: exit %d: %s", code, errOut)
	}
	if code, _, errOut := kc("mcp", "snapshot", "--nope"); code != exitUsage {
		t.Fatalf("kubectl mcp snapshot --nope: exit %d: %s", code, errOut)
	}
	// Completion through kubectl: kubectl runs kubectl_complete-mcp (docs/cli.md).
	if code, out, _ := kc("__complete", "mcp", "sna"); code != 0 || strings.Contains(out, "snapshot\t") {
		t.Fatalf("without kubectl_complete-mcp kubectl completed %q (exit %d)", out, code)
	}
	script := filepath.Join(dir, "kubectl_complete-mcp")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexec kubectl-mcp __complete \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(script)
	if code, out, errOut := kc("__complete", "mcp", "sna"); code != 0 || !strings.Contains(out, "snapshot\t") {
		t.Fatalf("kubectl __complete mcp sna: exit %d, %q, %s", code, out, errOut)
	}
	if code, out, _ := kc("__complete", "mcp", "snapshot", "--bea"); code != 0 || !strings.Contains(out, "--bearer-file\t") {
		t.Fatalf("kubectl __complete mcp snapshot --bea: exit %d, %q", code, out)
	}
}

// verbsWithoutExamples walks root and returns every runnable verb (its path below the root) and
// those whose help shows no example of themselves in display's words.
func verbsWithoutExamples(root *cobra.Command, display string) (verbs map[string]bool, missing []string) {
	verbs = map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		path := verbPath(c)
		if c != root && len(c.Commands()) == 0 && c.Name() != "help" && !strings.HasPrefix(path, "completion") {
			verbs[path] = true
			if !strings.Contains(c.Example, display+" "+path) {
				missing = append(missing, path)
			}
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	return verbs, missing
}

// Every runnable verb has an Examples section in its help, in the words of the name it runs as,
// and every entry of examples names a verb that exists. Twin: a verb without one is found.
func TestEveryVerbHasExamples(t *testing.T) {
	for _, name := range []string{programName, pluginBinaryName} {
		env := &cliEnv{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }, name: name}
		verbs, missing := verbsWithoutExamples(newRootCmd(env), env.displayName())
		if len(verbs) < 15 {
			t.Fatalf("walked only %d verbs", len(verbs))
		}
		if len(missing) > 0 {
			t.Errorf("%s: verbs without an example of themselves: %v", name, missing)
		}
		for path := range examples {
			if !verbs[path] {
				t.Errorf("examples names %q, which is no verb", path)
			}
		}
	}
	root := newRootCmd(&cliEnv{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }})
	root.AddCommand(&cobra.Command{Use: "bare", Run: func(*cobra.Command, []string) {}})
	if _, missing := verbsWithoutExamples(root, programName); len(missing) != 1 || missing[0] != "bare" {
		t.Fatalf("twin: verbs without examples %v, want [bare]", missing)
	}
}

// A network failure names its class, never the address or the URL's query: a server and a
// registry nobody listens for (a loopback port bound, then closed) are connection_refused.
func TestNetworkFailureNamesItsCause(t *testing.T) {
	l, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	profile, _ := deploymentProfile(t, false)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"snapshot", "--url", "http://" + addr + "/mcp?token=s3cr3t"}, "HTTP exchange failed (connection_refused)"},
		{[]string{"pack", "push", profile, "--plain-http", "--to", addr + "/team/svc"}, "registry push failed: connection_refused"},
	} {
		code, out, errOut := runServerCLI(t, func(string) string { return "" }, tc.args...)
		if code != exitFailure || !strings.Contains(errOut, tc.want) || out != "" || strings.Contains(errOut, "s3cr3t") {
			t.Errorf("%v: exit %d, want 1 naming %q: %s", tc.args, code, tc.want, errOut)
		}
	}
}
