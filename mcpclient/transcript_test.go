package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/b10x/connector-mcp/internal/mcptest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden transcripts")

// TestTranscripts pins, message by message, what the client sends over Streamable HTTP for
// connect + ListTools + CallTool + Close in each era (golden files in testdata; regenerate with
// go test -run TestTranscripts -update). Each line: method, the MCP headers, the params.
func TestTranscripts(t *testing.T) {
	cases := []struct {
		name string
		era  mcptest.Era
		// the behaviour the transcript pins
		pins string
	}{
		{"http-modern", mcptest.Modern, "discover with _meta and no capabilities; per-request _meta; Mcp-Method/Mcp-Name headers"},
		{"http-legacy", mcptest.Legacy, "discover refused -> initialize 2025-11-25 with empty capabilities, initialized notification, MCP-Protocol-Version"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			var b bytes.Buffer
			fmt.Fprintf(&b, "# %s: %s\n", c.name, c.pins)
			srv := mcptest.StartRawHTTP(&mcptest.Raw{Era: c.era, OnRequest: func(m string, p json.RawMessage, h http.Header) {
				mu.Lock()
				defer mu.Unlock()
				var compact bytes.Buffer
				if len(p) > 0 {
					_ = json.Compact(&compact, p)
				}
				fmt.Fprintf(&b, "-> %s [version=%q method=%q name=%q] %s\n", m, h.Get("MCP-Protocol-Version"), h.Get("Mcp-Method"), h.Get("Mcp-Name"), compact.String())
			}})
			t.Cleanup(srv.Close)
			s, err := NewClient(nil).Connect(context.Background(), ServerConfig{HTTP: &HTTPServer{URL: srv.URL}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.CallTool(context.Background(), "echo", json.RawMessage(`{"text":"hi"}`)); err != nil {
				t.Fatal(err)
			}
			s.Close()
			mu.Lock()
			got := b.Bytes()
			mu.Unlock()
			compareGolden(t, c.name, got)
		})
	}
}

// compareGolden compares a transcript with testdata/NAME.golden, or rewrites it with -update.
func compareGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil { //nolint:gosec // testdata/<case name>.golden, names from this file
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("transcript changed:\n--- got\n%s--- want\n%s", got, want)
	}
}

// transcriptServerFlag is the first argument that turns the test binary into a stdio server that
// appends every message it receives to a transcript file: -transcript-server FILE ERA DISCOVER.
const transcriptServerFlag = "-transcript-server"

// Environment variables of the stdio transcripts: the client is told to inherit the first; the
// second is set in the parent too and must never reach the child.
const (
	transcriptInheritedEnv = "MCPCLIENT_TRANSCRIPT_INHERITED"
	transcriptSecretEnv    = "MCPCLIENT_TRANSCRIPT_SECRET" //nolint:gosec // a variable name, not a credential
)

// runIfTranscriptServer serves the raw engine over stdio when the test binary was started with
// transcriptServerFlag, writing "== process env=[NAMES]" when it starts and "-> METHOD PARAMS" for
// each message it reads (except notifications/cancelled, see below). It does not return in that
// case.
func runIfTranscriptServer() {
	if len(os.Args) != 5 || os.Args[1] != transcriptServerFlag {
		return
	}
	f, err := os.OpenFile(os.Args[2], os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600) //nolint:gosec // the test's own temp file, passed in argv
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		syscall.Exit(1)
	}
	var names []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		names = append(names, name)
	}
	slices.Sort(names)
	var mu sync.Mutex
	line := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		_, _ = f.WriteString(s) // one write per line: O_APPEND keeps the lines of two processes whole
	}
	line(fmt.Sprintf("== process env=%q\n", names))
	r := &mcptest.Raw{Era: mcptest.Era(os.Args[3]), Discover: os.Args[4], OnRequest: func(m string, p json.RawMessage, _ http.Header) {
		if m == "notifications/cancelled" {
			// The SDK cancels the abandoned probe while the client closes that process: whether
			// the notification is read before stdin ends is a race, so it is not pinned.
			return
		}
		var compact bytes.Buffer
		if len(p) > 0 {
			_ = json.Compact(&compact, p)
		}
		line(fmt.Sprintf("-> %s %s\n", m, compact.String()))
	}}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code := 0
	if err := r.ServeStdio(ctx, os.Stdin, os.Stdout); err != nil {
		code = 1
	}
	_ = f.Close()
	syscall.Exit(code) // skips the race detector's exit delay, as mcptest.RunIfServer does
}

// TestStdioTranscripts pins, message by message, what the client sends to a stdio server in each
// negotiation path, process by process (golden files in testdata; regenerate with
// go test -run TestStdioTranscripts -update). Each session connects, calls "echo" (which lists
// the tools first) and closes; a second session of the same client shows the cached era. Each
// "== process" line is one server process and the exact names of its environment.
func TestStdioTranscripts(t *testing.T) {
	t.Setenv(transcriptInheritedEnv, "inherited")
	t.Setenv(transcriptSecretEnv, "must-not-reach-the-child")
	cases := []struct {
		name     string
		era      mcptest.Era
		discover string
		// the behaviour the transcript pins
		pins string
	}{
		{"stdio-modern", mcptest.Modern, "answer",
			"discover with _meta and no capabilities, per-request _meta, in every session (2026-07-28 has no initialize); child env exactly the inherited names"},
		{"stdio-legacy", mcptest.Legacy, "answer",
			"discover answered method-not-found: the SDK falls back to initialize 2025-11-25 + initialized in the same process; the era is cached: the second session starts with initialize"},
		{"stdio-ignores-discover", mcptest.Legacy, "ignore",
			"discover never answered: probe deadline, then a fresh process with initialize (go-sdk #1177); the era is cached"},
		{"stdio-exits-on-discover", mcptest.Legacy, "exit",
			"the process exits on discover: a fresh process with initialize (go-sdk #1177); the era is cached"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "transcript")
			exe, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			cfg := ServerConfig{Stdio: &StdioServer{
				Argv:       []string{exe, transcriptServerFlag, file, string(c.era), c.discover},
				InheritEnv: []string{transcriptInheritedEnv},
			}, Limits: Limits{ProbeTimeout: 2 * time.Second}}
			client := NewClient(nil)
			for i := range 2 {
				s, err := client.Connect(context.Background(), cfg)
				if err != nil {
					t.Fatalf("session %d: %v", i+1, err)
				}
				if _, err := s.CallTool(context.Background(), "echo", json.RawMessage(`{"text":"hi"}`)); err != nil {
					t.Fatalf("session %d: %v", i+1, err)
				}
				s.Close()
			}
			got, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(got), transcriptSecretEnv) {
				t.Fatalf("a variable the client was not told to inherit reached the child:\n%s", got)
			}
			compareGolden(t, c.name, append([]byte(fmt.Sprintf("# %s: %s\n", c.name, c.pins)), got...))
		})
	}
}
