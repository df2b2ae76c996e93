package mcpclient

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/b10x/connector-mcp/internal/mcptest"
	"github.com/b10x/connector-mcp/refusal"
)

// hostileCase is one misbehaving server and the named refusal it must end in.
type hostileCase struct {
	name    string
	hostile string
	size    int
	limits  Limits
	call    string // "" lists tools; otherwise calls this tool
	want    string
	reason  error
	http    bool // also run over HTTP (raw engine)
	sse     bool
}

var hostileCases = []hostileCase{
	{name: "oversize frame", hostile: mcptest.HostileOversizeFrame, size: 256 << 10, limits: Limits{MaxFrameBytes: 64 << 10}, want: "frame_too_large", reason: ErrFrameTooLarge, http: true},
	{name: "oversize SSE event", hostile: mcptest.HostileOversizeSSE, size: 256 << 10, limits: Limits{MaxFrameBytes: 64 << 10}, want: "frame_too_large", reason: ErrFrameTooLarge, http: true, sse: true},
	{name: "endless pagination", hostile: mcptest.HostileEndlessPages, limits: Limits{MaxPages: 5}, want: "too_many_pages", reason: ErrTooManyPages, http: true},
	{name: "repeated cursor", hostile: mcptest.HostileRepeatedCursor, want: "repeated_cursor", reason: ErrRepeatedCursor, http: true},
	{name: "too many tools", hostile: mcptest.HostileTooManyTools, size: 50, limits: Limits{MaxTools: 10}, want: "too_many_tools", reason: ErrTooManyTools, http: true},
	{name: "huge descriptor", hostile: mcptest.HostileHugeDescriptor, size: 100 << 10, limits: Limits{MaxDescriptorBytes: 16 << 10}, want: "descriptor_too_large", reason: ErrDescriptorTooLarge, http: true},
	{name: "invalid JSON", hostile: mcptest.HostileInvalidJSON, want: "invalid_json", http: true},
	{name: "duplicate key", hostile: mcptest.HostileDuplicateKey, want: "duplicate_key", http: true},
	{name: "duplicate tool name", hostile: mcptest.HostileDuplicateName, want: "duplicate_tool_name", http: true},
	{name: "slow list past deadline", hostile: mcptest.HostileSlow, limits: Limits{CallTimeout: 300 * time.Millisecond}, want: "call_timeout", reason: ErrCallTimeout, http: true},
	{name: "slow call past deadline", hostile: mcptest.HostileSlowCall, limits: Limits{CallTimeout: 300 * time.Millisecond}, call: "echo", want: "call_timeout", reason: ErrCallTimeout, http: true},
	{name: "sampling request", hostile: mcptest.HostileSampling, call: "echo", want: "sampling", reason: ErrFeatureRefused, http: true, sse: true},
	{name: "elicitation request", hostile: mcptest.HostileElicitation, call: "echo", want: "elicitation", reason: ErrFeatureRefused, http: true, sse: true},
	{name: "roots request", hostile: mcptest.HostileRoots, call: "echo", want: "roots", reason: ErrFeatureRefused, http: true, sse: true},
	{name: "input_required result", hostile: mcptest.HostileInputRequired, call: "echo", want: "input_required", reason: ErrFeatureRefused, http: true},
	{name: "task result", hostile: mcptest.HostileTaskResult, call: "echo", want: "tasks", reason: ErrFeatureRefused, http: true},
	{name: "task result over SSE", hostile: mcptest.HostileTaskResult, call: "echo", want: "tasks", reason: ErrFeatureRefused, http: true, sse: true},
	{name: "other non-complete result type", hostile: mcptest.HostileOtherResultType, call: "echo", want: "multi_round", reason: ErrFeatureRefused, http: true},
	{name: "task-required tool", hostile: mcptest.HostileTaskRequired, call: "long_job", want: "tasks", reason: ErrFeatureRefused},
	{name: "oversize result", hostile: mcptest.HostileOversizeResult, size: 128 << 10, limits: Limits{MaxResultBytes: 32 << 10}, call: "echo", want: "result_too_large", reason: ErrResultTooLarge, http: true},
	{name: "duplicate key in result", hostile: mcptest.HostileDuplicateResult, call: "echo", want: "duplicate_key", http: true},
}

func (c hostileCase) run(t *testing.T, cfg ServerConfig) error {
	t.Helper()
	cfg.Limits = c.limits
	if cfg.Limits.ProbeTimeout == 0 {
		cfg.Limits.ProbeTimeout = 3 * time.Second
	}
	ctx := context.Background()
	s, err := NewClient(nil).Connect(ctx, cfg)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer s.Close()
	if c.call == "" {
		snap, err := s.ListTools(ctx)
		if err == nil {
			t.Fatalf("ListTools succeeded with %d tools", len(snap.Tools))
		}
		return err
	}
	res, err := s.CallTool(ctx, c.call, json.RawMessage(`{"text":"hi"}`))
	if err == nil {
		t.Fatalf("CallTool succeeded: %.200s", res)
	}
	return err
}

func TestHostileServers(t *testing.T) {
	for _, c := range hostileCases {
		check := func(t *testing.T, err error) {
			if got := refusal.Name(err); got != c.want {
				t.Fatalf("error %v: refusal %q, want %q", err, got, c.want)
			}
			if c.reason != nil && !errors.Is(err, c.reason) {
				t.Fatalf("error %v does not match %v", err, c.reason)
			}
		}
		t.Run(c.name+"/stdio", func(t *testing.T) {
			t.Parallel()
			check(t, c.run(t, stdio("--hostile", c.hostile, "--size", strconv.Itoa(c.size), "--delay", "5s")))
		})
		if c.http {
			t.Run(c.name+"/http", func(t *testing.T) {
				t.Parallel()
				srv := mcptest.StartRawHTTP(&mcptest.Raw{Era: mcptest.Modern, Hostile: c.hostile, Size: c.size, Delay: 5 * time.Second, SSE: c.sse})
				defer srv.Close()
				check(t, c.run(t, ServerConfig{HTTP: &HTTPServer{URL: srv.URL}}))
			})
		}
	}
}

// TestBoundsHaveHeadroom is the must-pass twin of TestHostileServers: the same misbehaviour within
// raised bounds is accepted, so each refusal above is caused by its bound.
func TestBoundsHaveHeadroom(t *testing.T) {
	cases := []struct {
		hostile string
		size    int
		limits  Limits
		call    string
	}{
		{mcptest.HostileOversizeFrame, 256 << 10, Limits{MaxFrameBytes: 1 << 20, MaxDescriptorBytes: 1 << 20}, ""},
		{mcptest.HostileTooManyTools, 50, Limits{MaxTools: 50}, ""},
		{mcptest.HostileHugeDescriptor, 100 << 10, Limits{MaxDescriptorBytes: 128 << 10}, ""},
		{mcptest.HostileOversizeResult, 128 << 10, Limits{MaxResultBytes: 256 << 10}, "echo"},
		{mcptest.HostileSlow, 0, Limits{CallTimeout: 5 * time.Second}, ""},
	}
	for _, c := range cases {
		t.Run(c.hostile, func(t *testing.T) {
			t.Parallel()
			cfg := stdio("--hostile", c.hostile, "--size", strconv.Itoa(c.size), "--delay", "100ms")
			cfg.Limits = c.limits
			ctx := context.Background()
			s, err := NewClient(nil).Connect(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if c.call == "" {
				if _, err := s.ListTools(ctx); err != nil {
					t.Fatalf("ListTools: %v", err)
				}
				return
			}
			if _, err := s.CallTool(ctx, c.call, nil); err != nil {
				t.Fatalf("CallTool: %v", err)
			}
		})
	}
	// Endless pagination within MaxPages: the raw engine's pages are endless, so a bounded listing
	// with a normal paginated server stands in.
	cfg := stdio("--raw", "--page-size", "1")
	cfg.Limits.MaxPages = 2
	s, err := NewClient(nil).Connect(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.ListTools(context.Background()); err != nil {
		t.Fatalf("one page within MaxPages=2: %v", err)
	}
}

// TestOversizeFrameMemory: a 32 MiB frame against a 64 KiB bound is refused without the client
// allocating anything near the frame's size (the server is a separate process).
func TestOversizeFrameMemory(t *testing.T) {
	cfg := stdio("--hostile", mcptest.HostileOversizeFrame, "--size", strconv.Itoa(32<<20))
	cfg.Limits.MaxFrameBytes = 64 << 10
	ctx := context.Background()
	s, err := NewClient(nil).Connect(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err = s.ListTools(ctx)
	runtime.ReadMemStats(&after)
	if refusal.Name(err) != "frame_too_large" {
		t.Fatalf("err = %v", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
		t.Fatalf("allocated %d bytes while refusing a 32 MiB frame at a 64 KiB bound", grew)
	}
}

// startServerProcess runs the test server program as a child process serving HTTP and returns its
// MCP URL, so that the client's allocations can be measured alone.
func startServerProcess(t *testing.T, flags ...string) string {
	t.Helper()
	argv := mcptest.StdioArgv(append([]string{"--http", "127.0.0.1:0"}, flags...)...)
	cmd := exec.CommandContext(context.Background(), argv[0], argv[1:]...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stderr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(line, "http://")
	if i < 0 {
		t.Fatalf("startup line %q", line)
	}
	return strings.TrimSpace(line[i:])
}

// TestOversizeBodyMemory: a 32 MiB HTTP body (JSON, then one SSE event) against a 64 KiB frame
// bound is refused without the client (or the SDK above it) reading it into memory.
func TestOversizeBodyMemory(t *testing.T) {
	for _, mode := range []string{mcptest.HostileOversizeFrame, mcptest.HostileOversizeSSE} {
		t.Run(mode, func(t *testing.T) {
			url := startServerProcess(t, "--hostile", mode, "--size", strconv.Itoa(32<<20))
			cfg := ServerConfig{HTTP: &HTTPServer{URL: url}, Limits: Limits{MaxFrameBytes: 64 << 10}}
			s := connect(t, cfg)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := s.ListTools(context.Background())
			runtime.ReadMemStats(&after)
			if refusal.Name(err) != "frame_too_large" {
				t.Fatalf("err = %v", err)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
				t.Fatalf("allocated %d bytes while refusing a 32 MiB body at a 64 KiB bound", grew)
			}
		})
	}
}

// TestRefusedRequestLeavesSessionUsable: a refused server-to-client request ends the call in
// flight, not the session.
func TestRefusedRequestLeavesSessionUsable(t *testing.T) {
	s := connect(t, stdio("--hostile", mcptest.HostileSampling))
	ctx := context.Background()
	if _, err := s.ListTools(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CallTool(ctx, "echo", nil); refusal.Name(err) != "sampling" {
		t.Fatalf("call: %v", err)
	}
	if _, err := s.ListTools(ctx); err != nil {
		t.Fatalf("listing after the refusal: %v", err)
	}
}
