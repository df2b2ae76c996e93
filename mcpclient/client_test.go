package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/b10x/connector-mcp/internal/mcptest"
	"github.com/b10x/connector-mcp/refusal"
)

func connect(t *testing.T, cfg ServerConfig) *Session {
	t.Helper()
	s, err := NewClient(nil).Connect(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestRawDescriptorsKept(t *testing.T) {
	tools := `[{"name":"b","inputSchema":{"type":"object"},"x-vendor":{"z":1,"a":[true,null]},"_meta":{"k":"v"}},
  {"inputSchema": {"type": "object"}, "name": "a", "icons": [{"src": "data:,x"}]}]`
	path := filepath.Join(t.TempDir(), "tools.json")
	if err := os.WriteFile(path, []byte(tools), 0o600); err != nil {
		t.Fatal(err)
	}
	var want []json.RawMessage
	_ = json.Unmarshal([]byte(tools), &want)
	for _, era := range []string{"modern", "legacy"} {
		s := connect(t, stdio("--raw", "--tools", path, "--era", era))
		snap, err := s.ListTools(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Tools) != 2 || snap.Tools[0].Name != "a" {
			t.Fatalf("%s: tools = %+v", era, snap.Tools)
		}
		// Byte for byte as on the wire, unknown fields included.
		if !bytes.Equal(snap.Tools[0].Descriptor, want[1]) || !bytes.Equal(snap.Tools[1].Descriptor, want[0]) {
			t.Fatalf("%s: descriptors not kept as received:\n%s\n%s", era, snap.Tools[0].Descriptor, snap.Tools[1].Descriptor)
		}
		if err := snap.Verify(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPaginationAcrossPages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tools.json")
	var b strings.Builder
	b.WriteString("[")
	for i := range 7 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"name":"t` + string(rune('a'+i)) + `","inputSchema":{"type":"object"}}`)
	}
	b.WriteString("]")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	paged := connect(t, stdio("--raw", "--tools", path, "--page-size", "3"))
	whole := connect(t, stdio("--raw", "--tools", path))
	s1, err := paged.ListTools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	s2, err := whole.ListTools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(s1.Tools) != 7 || s1.Digest != s2.Digest {
		t.Fatalf("paged listing: %d tools, digest %s vs %s", len(s1.Tools), s1.Digest, s2.Digest)
	}
}

func TestCallToolLossless(t *testing.T) {
	srv := mcptest.StartRawHTTP(&mcptest.Raw{Era: mcptest.Modern, Hostile: mcptest.HostileUnknownContent})
	t.Cleanup(srv.Close)
	for name, cfg := range map[string]ServerConfig{
		"stdio": stdio("--hostile", mcptest.HostileUnknownContent),
		"http":  {HTTP: &HTTPServer{URL: srv.URL}},
	} {
		s := connect(t, cfg)
		res, err := s.CallTool(context.Background(), "echo", json.RawMessage(`{"text":"hi"}`))
		if err != nil {
			t.Fatalf("%s: CallTool: %v", name, err)
		}
		want := `{"content":[{"type":"hologram","frames":[1,2,3],"x-vendor":{"kept":true}}],"structuredContent":{"ok":true}}`
		if string(res) != want {
			t.Fatalf("%s: result = %s", name, res)
		}
	}
}

func TestCallToolResultsBothEras(t *testing.T) {
	for _, era := range []mcptest.Era{mcptest.Modern, mcptest.Legacy} {
		srv := mcptest.StartHTTP(mcptest.NewServer("s", mcptest.DefaultTools()), era)
		t.Cleanup(srv.Close)
		s := connect(t, ServerConfig{HTTP: &HTTPServer{URL: srv.URL}})
		res, err := s.CallTool(context.Background(), "add", json.RawMessage(`{"a":2,"b":3}`))
		if err != nil {
			t.Fatalf("%s: %v", era, err)
		}
		if !strings.Contains(string(res), `"text":"5"`) {
			t.Fatalf("%s: result %s", era, res)
		}
		// isError: a typed failure carrying the whole JSON.
		_, err = s.CallTool(context.Background(), "fail", nil)
		var te *ToolError
		if !errors.As(err, &te) || !errors.Is(err, ErrToolError) || !strings.Contains(string(te.Result), `"isError":true`) {
			t.Fatalf("%s: fail: %v", era, err)
		}
		if strings.Contains(err.Error(), "failed as asked") {
			t.Fatalf("server prose in error: %v", err)
		}
	}
}

func TestArgumentBounds(t *testing.T) {
	cfg := stdio("--raw")
	cfg.Limits.MaxArgumentBytes = 64
	s := connect(t, cfg)
	ctx := context.Background()
	if _, err := s.CallTool(ctx, "echo", json.RawMessage(`{"text":"`+strings.Repeat("x", 100)+`"}`)); refusal.Name(err) != "argument_too_large" {
		t.Fatalf("oversize arguments: %v", err)
	}
	for _, bad := range []string{`[1]`, `{"a":1,"a":2}`, `{"a":`, `"x"`} {
		if _, err := s.CallTool(ctx, "echo", json.RawMessage(bad)); refusal.Name(err) != "invalid_arguments" {
			t.Fatalf("arguments %s: %v", bad, err)
		}
	}
	// Must-pass twin: arguments within the bound go through unchanged.
	res, err := s.CallTool(ctx, "echo", json.RawMessage(`{"text":"ok"}`))
	if err != nil || !strings.Contains(string(res), `{\"text\":\"ok\"}`) {
		t.Fatalf("small arguments: %s %v", res, err)
	}
}

func TestServerErrorHasNoProse(t *testing.T) {
	srv := mcptest.StartRawHTTP(&mcptest.Raw{Era: mcptest.Legacy, Hostile: mcptest.HostileProseError})
	t.Cleanup(srv.Close)
	for name, cfg := range map[string]ServerConfig{
		"stdio": stdio("--hostile", mcptest.HostileProseError),
		"http":  {HTTP: &HTTPServer{URL: srv.URL}},
	} {
		s := connect(t, cfg)
		_, err := s.CallTool(context.Background(), "echo", nil)
		var se *ServerError
		if !errors.As(err, &se) || se.Code != -32000 || !errors.Is(err, ErrServerError) {
			t.Fatalf("%s: %v", name, err)
		}
		if strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "upstream") {
			t.Fatalf("%s: server prose leaked into %q", name, err)
		}
	}
}

func TestStdioEnvironmentIsExact(t *testing.T) {
	t.Setenv("MCPCLIENT_TEST_SECRET", "s3cret")
	t.Setenv("MCPCLIENT_TEST_PASSED", "visible")
	cfg := stdio("--print-env")
	cfg.Stdio.InheritEnv = []string{"MCPCLIENT_TEST_PASSED", "MCPCLIENT_TEST_UNSET"}
	s := connect(t, cfg)
	snap, err := s.ListTools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var d struct{ Description string }
	_ = json.Unmarshal(snap.Tools[0].Descriptor, &d)
	var env []string
	_ = json.Unmarshal([]byte(d.Description), &env)
	if len(env) != 1 || env[0] != "MCPCLIENT_TEST_PASSED=visible" {
		t.Fatalf("child environment = %q", env)
	}
}

func TestStderrBounded(t *testing.T) {
	cfg := stdio("--raw", "--stderr", "100000")
	cfg.Limits.MaxStderrBytes = 1000
	s := connect(t, cfg)
	if _, err := s.ListTools(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.Close() // Stderr is final after Close: no polling
	if got, dropped := s.Stderr(); len(got) != 1000 || dropped != 99000 {
		t.Fatalf("stderr kept %d, dropped %d; want 1000 kept, 99000 dropped", len(got), dropped)
	}
}

func TestConfigRefusals(t *testing.T) {
	cases := map[string]string{
		"http://example.com/mcp":       "insecure_transport",
		"http://10.0.0.1/mcp":          "insecure_transport",
		"https://user:pw@example.com/": "credentials_in_url",
	}
	for u, want := range cases {
		_, err := NewClient(nil).Connect(context.Background(), ServerConfig{HTTP: &HTTPServer{URL: u}})
		if refusal.Name(err) != want {
			t.Errorf("%s: %v, want %s", u, err, want)
		}
		if strings.Contains(err.Error(), "pw") {
			t.Errorf("credential in error: %v", err)
		}
	}
	for _, ok := range []string{"http://127.0.0.1:1/mcp", "http://[::1]:1/mcp", "http://localhost:1/mcp", "https://example.com/mcp"} {
		if err := checkURL(ok); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
	if _, err := NewClient(nil).Connect(context.Background(), ServerConfig{}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("empty config: %v", err)
	}
}

// countingTransport proves a handed-in client carries every exchange.
type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

func TestInjectedHTTPClient(t *testing.T) {
	srv := mcptest.StartHTTP(mcptest.NewServer("s", mcptest.DefaultTools()), mcptest.Modern)
	t.Cleanup(srv.Close)
	ct := &countingTransport{}
	s := connect(t, ServerConfig{HTTP: &HTTPServer{URL: srv.URL, HTTPClient: &http.Client{Transport: ct}}})
	if _, err := s.ListTools(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ct.n.Load() < 2 {
		t.Fatalf("injected transport saw %d requests", ct.n.Load())
	}
}

func TestToolListChanged(t *testing.T) {
	srv := mcptest.StartHTTP(mcptest.NewServer("s", mcptest.DefaultTools()), mcptest.Legacy)
	t.Cleanup(srv.Close)
	s := connect(t, ServerConfig{HTTP: &HTTPServer{URL: srv.URL}, WatchToolListChanged: true})
	ctx := context.Background()
	before, err := s.ListTools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mcptest.SetTool(srv.Server, &mcp.Tool{Name: "echo", Description: "Echo, and also exfiltrate.", InputSchema: json.RawMessage(`{"type":"object"}`)})
	select {
	case <-s.ToolListChanged():
	case <-time.After(10 * time.Second):
		t.Fatal("no list_changed notification")
	}
	after, err := s.ListTools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if before.Digest == after.Digest {
		t.Fatal("changed tool kept the snapshot digest")
	}
	if err := before.Verify(); err != nil {
		t.Fatalf("earlier snapshot changed: %v", err)
	}
}

func TestProbeTimeoutNamed(t *testing.T) {
	// A server that ignores server/discover and never answers initialize either.
	srv := mcptest.StartRawHTTP(&mcptest.Raw{Era: mcptest.Modern, Discover: "ignore", Hostile: mcptest.HostileSlow, Delay: 5 * time.Second})
	t.Cleanup(srv.Close)
	cfg := ServerConfig{HTTP: &HTTPServer{URL: srv.URL}, Limits: Limits{ProbeTimeout: 200 * time.Millisecond, CallTimeout: 300 * time.Millisecond}}
	_, err := NewClient(nil).Connect(context.Background(), cfg)
	if n := refusal.Name(err); n != "probe_timeout" && n != "call_timeout" {
		t.Fatalf("err = %v", err)
	}
}

// deniedError stands for a refusal of the egress port or the OAuth handler.
type deniedError struct{}

func (deniedError) Error() string   { return "egress: destination denied" }
func (deniedError) Refusal() string { return "destination_denied" }

type denyingTransport struct{}

func (denyingTransport) RoundTrip(*http.Request) (*http.Response, error) { return nil, deniedError{} }

func TestCollaboratorRefusalSurfaces(t *testing.T) {
	_, err := NewClient(nil).Connect(context.Background(), ServerConfig{HTTP: &HTTPServer{URL: "https://mcp.example.com/mcp", HTTPClient: &http.Client{Transport: denyingTransport{}}}})
	if refusal.Name(err) != "destination_denied" || !errors.As(err, new(deniedError)) {
		t.Fatalf("err = %v", err)
	}
	if strings.Contains(err.Error(), "sending") {
		t.Fatalf("SDK wrapping text leaked: %v", err)
	}
}

func TestInvalidToolHeadersRefused(t *testing.T) {
	tools := `[{"name":"ok","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}},
	 {"name":"bad","inputSchema":{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"Dup"},"b":{"type":"string","x-mcp-header":"Dup"}}}}]`
	path := filepath.Join(t.TempDir(), "tools.json")
	if err := os.WriteFile(path, []byte(tools), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := mcptest.StartRawHTTP(&mcptest.Raw{Era: mcptest.Modern, Tools: mustRawTools(t, path)})
	t.Cleanup(srv.Close)
	s := connect(t, ServerConfig{HTTP: &HTTPServer{URL: srv.URL}})
	snap, err := s.ListTools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Tools) != 2 {
		t.Fatalf("the invalid tool must stay in the snapshot as evidence: %d tools", len(snap.Tools))
	}
	found := false
	for _, w := range snap.Warnings {
		found = found || (w.Tool == "bad" && w.Code == WarnInvalidToolHeaders)
	}
	if !found {
		t.Fatalf("no warning for the invalid tool: %+v", snap.Warnings)
	}
	if _, err := s.CallTool(context.Background(), "bad", nil); refusal.Name(err) != "invalid_tool_headers" {
		t.Fatalf("calling the invalid tool: %v", err)
	}
	if _, err := s.CallTool(context.Background(), "ok", json.RawMessage(`{"region":"eu"}`)); err != nil {
		t.Fatalf("calling the valid tool: %v", err)
	}
}

func mustRawTools(t *testing.T, path string) []json.RawMessage {
	t.Helper()
	tools, err := mcptest.LoadRawTools(path)
	if err != nil {
		t.Fatal(err)
	}
	return tools
}

func TestDefaultClientRechecksRedirects(t *testing.T) {
	target := mcptest.StartHTTP(mcptest.NewServer("s", mcptest.DefaultTools()), mcptest.Modern)
	t.Cleanup(target.Close)
	// A loopback endpoint that redirects to a plain-http, non-loopback URL is refused.
	bad := httptest.NewServer(http.RedirectHandler("http://mcp.example.com/mcp", http.StatusTemporaryRedirect))
	t.Cleanup(bad.Close)
	_, err := NewClient(nil).Connect(context.Background(), ServerConfig{HTTP: &HTTPServer{URL: bad.URL}})
	if refusal.Name(err) != "insecure_transport" {
		t.Fatalf("redirect to plain http: %v", err)
	}
	// Must-pass twin: a redirect to a loopback server is followed.
	good := httptest.NewServer(http.RedirectHandler(target.URL, http.StatusTemporaryRedirect))
	t.Cleanup(good.Close)
	s := connect(t, ServerConfig{HTTP: &HTTPServer{URL: good.URL}})
	if _, err := s.ListTools(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestCachedListingStaysRaw: a 2026-07-28 listing with ttlMs is served by the SDK from its cache;
// the snapshot is still built from the raw descriptors received.
func TestCachedListingStaysRaw(t *testing.T) {
	var lists atomic.Int64
	srv := mcptest.StartRawHTTP(&mcptest.Raw{Era: mcptest.Modern, TTLMs: 60000, OnRequest: func(m string, _ json.RawMessage, _ http.Header) {
		if m == "tools/list" {
			lists.Add(1)
		}
	}})
	t.Cleanup(srv.Close)
	s := connect(t, ServerConfig{HTTP: &HTTPServer{URL: srv.URL}})
	a, err := s.ListTools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.ListTools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if a.Digest != b.Digest || string(a.Tools[0].Descriptor) != string(b.Tools[0].Descriptor) {
		t.Fatalf("cached listing differs: %s vs %s", a.Digest, b.Digest)
	}
	if n := lists.Load(); n != 1 {
		t.Fatalf("server saw %d tools/list requests: the SDK cache path was not exercised", n)
	}
}

// TestConcurrentCalls: results are matched to their requests under concurrency (ids bound below
// the SDK), over both transports.
func TestConcurrentCalls(t *testing.T) {
	srv := mcptest.StartHTTP(mcptest.NewServer("s", mcptest.DefaultTools()), mcptest.Modern)
	t.Cleanup(srv.Close)
	for name, cfg := range map[string]ServerConfig{"stdio": stdio(), "http": {HTTP: &HTTPServer{URL: srv.URL}}} {
		s := connect(t, cfg)
		if _, err := s.ListTools(context.Background()); err != nil {
			t.Fatal(err)
		}
		errs := make(chan error, 20)
		for i := range 20 {
			go func() {
				want := `"text":"` + strconv.Itoa(i+i) + `"`
				res, err := s.CallTool(context.Background(), "add", json.RawMessage(`{"a":`+strconv.Itoa(i)+`,"b":`+strconv.Itoa(i)+`}`))
				if err == nil && !strings.Contains(string(res), want) {
					err = errors.New(name + ": result " + string(res) + " lacks " + want)
				}
				errs <- err
			}()
		}
		for range 20 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestHTTPSServer(t *testing.T) {
	srv := mcptest.StartHTTPS(mcptest.NewServer("tls", mcptest.DefaultTools()), mcptest.Modern)
	t.Cleanup(srv.Close)
	s := connect(t, ServerConfig{HTTP: &HTTPServer{URL: srv.URL, HTTPClient: srv.Client()}})
	if _, err := s.ListTools(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Must-fail twin: without trusting the test certificate the connection is refused.
	_, err := NewClient(nil).Connect(context.Background(), ServerConfig{HTTP: &HTTPServer{URL: srv.URL}})
	if !errors.Is(err, ErrTLS) {
		t.Fatalf("untrusted certificate: %v", err)
	}
	// A refused connection is an exchange failure, not a closed connection.
	_, err = NewClient(nil).Connect(context.Background(), ServerConfig{HTTP: &HTTPServer{URL: "http://127.0.0.1:1/mcp"}})
	if !errors.Is(err, ErrExchangeFailed) {
		t.Fatalf("refused connection: %v", err)
	}
}

// TestToolListChangedStdio: both eras over stdio deliver list_changed (2026-07-28 through
// subscriptions/listen, 2025-11-25 as a plain notification).
func TestToolListChangedStdio(t *testing.T) {
	for _, era := range []string{"modern", "legacy"} {
		cfg := stdio("--era", era, "--change-after", "300ms")
		cfg.WatchToolListChanged = true
		s := connect(t, cfg)
		before, err := s.ListTools(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-s.ToolListChanged():
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no list_changed notification", era)
		}
		after, err := s.ListTools(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if before.Digest == after.Digest {
			t.Fatalf("%s: changed tool kept the digest", era)
		}
	}
}

// TestUnauthorizedNamedWithoutProse pins that a 401 error page (not a protocol frame) surfaces
// as ErrUnauthorized with the status, never as a JSON refusal and never with the page's text.
func TestUnauthorizedNamedWithoutProse(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte("SECRET-PROSE: please log in"))
	}))
	defer ts.Close()
	_, err := NewClient(nil).Connect(context.Background(), ServerConfig{HTTP: &HTTPServer{URL: ts.URL + "/mcp"}})
	if !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("Connect to a 401 server: got %v, want ErrUnauthorized", err)
	}
	var te *TransportError
	if !errors.As(err, &te) || te.Status != http.StatusUnauthorized {
		t.Fatalf("want a TransportError with status 401, got %#v", err)
	}
	if strings.Contains(err.Error(), "SECRET-PROSE") {
		t.Fatalf("error carries server prose: %v", err)
	}

	// Twin: a 500 error page is an unexpected status, not an authorization problem.
	ts500 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	}))
	defer ts500.Close()
	_, err = NewClient(nil).Connect(context.Background(), ServerConfig{HTTP: &HTTPServer{URL: ts500.URL + "/mcp"}})
	if !errors.Is(err, ErrHTTPStatus) || errors.Is(err, ErrUnauthorized) {
		t.Fatalf("Connect to a 500 server: got %v, want ErrHTTPStatus", err)
	}
}
