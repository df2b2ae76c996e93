package egress

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type echoIn struct {
	Text string `json:"text,omitempty"`
	Size int    `json:"size,omitempty"`
}

func newMCPServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "egress-test", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo text, or size bytes of it."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			text := in.Text
			if in.Size > 0 {
				text = strings.Repeat("z", in.Size)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
		})
	return s
}

// mcpRecorder records method, Authorization and response Content-Type of every request.
type mcpRecorder struct {
	mu     sync.Mutex
	reqs   []seen
	ctypes []string
}

func (r *mcpRecorder) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.reqs = append(r.reqs, seen{req.Method, req.URL.Path, req.Header.Get("Authorization"), req.Header.Get("Accept")})
		r.mu.Unlock()
		h.ServeHTTP(w, req)
		r.mu.Lock()
		r.ctypes = append(r.ctypes, req.Method+" "+w.Header().Get("Content-Type"))
		r.mu.Unlock()
	})
}

func (r *mcpRecorder) snapshot() ([]seen, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]seen(nil), r.reqs...), append([]string(nil), r.ctypes...)
}

func connect(t *testing.T, endpoint string, hc *http.Client, version string) (*mcp.ClientSession, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "egress-test-client", Version: "1.0.0"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
}

// TestMCPOverPortLegacySSE: a stateful (2025-11-25) go-sdk server answering with SSE. The
// go-sdk client, handed the port's HTTP client, gets its tools and calls through it; its
// standalone GET stream is declined locally (the server never sees a GET); the session DELETE
// goes through the port.
func TestMCPOverPortLegacySSE(t *testing.T) {
	var rec mcpRecorder
	srv := serveOn(t, "127.0.0.5", rec.wrap(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return newMCPServer() }, nil)))
	tr := newTransport(t, inCluster(srv.URL+"/mcp"))
	hc := tr.HTTPClient()
	port := &methodCounter{next: hc.Transport, firstGet: make(chan struct{})}
	hc.Transport = port
	cs, err := connect(t, srv.URL+"/mcp", hc, "2025-11-25")
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	ctx := context.Background()
	lt, err := cs.ListTools(ctx, nil)
	if err != nil || len(lt.Tools) != 1 || lt.Tools[0].Name != "echo" {
		t.Fatalf("tools/list: %v %v", lt, err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "hi" {
		t.Fatalf("tools/call: %v %v", res, err)
	}
	// The client opens its standalone stream asynchronously after initialize: wait until the
	// port has been asked for it.
	select {
	case <-port.firstGet:
	case <-time.After(10 * time.Second):
		t.Fatal("the client never asked for its standalone stream; this test needs it to")
	}
	if err := cs.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	reqs, ctypes := rec.snapshot()
	var gets, deletes, sse int
	for _, r := range reqs {
		switch r.method {
		case http.MethodGet:
			gets++
		case http.MethodDelete:
			deletes++
		}
	}
	for _, c := range ctypes {
		if c == "POST text/event-stream" {
			sse++
		}
	}
	if gets != 0 {
		t.Errorf("server saw %d GET requests; the standalone stream must be declined by the port", gets)
	}
	if deletes != 1 {
		t.Errorf("server saw %d DELETE requests, want the session DELETE through the port", deletes)
	}
	if sse < 2 {
		t.Errorf("server answered %d POSTs with SSE (%v); this test needs SSE responses", sse, ctypes)
	}
}

// methodCounter watches the port for GET requests; firstGet is closed at the first.
type methodCounter struct {
	next     http.RoundTripper
	once     sync.Once
	firstGet chan struct{}
}

func (m *methodCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet {
		m.once.Do(func() { close(m.firstGet) })
	}
	return m.next.RoundTrip(r)
}

// TestMCPOverPortSSEBound: an SSE POST response over the bound is refused; the call fails
// with response_too_large rather than a truncated result. Its twin under the bound passes.
func TestMCPOverPortSSEBound(t *testing.T) {
	srv := serveOn(t, "127.0.0.5", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return newMCPServer() }, nil))
	p := inCluster(srv.URL + "/mcp")
	p.MaxResponseBytes = 64 << 10
	tr := newTransport(t, p)
	cs, err := connect(t, srv.URL+"/mcp", tr.HTTPClient(), "2025-11-25")
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	ctx := context.Background()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"size": 32 << 10}})
	if err != nil || res.IsError || len(res.Content[0].(*mcp.TextContent).Text) != 32<<10 {
		t.Fatalf("result under the bound: %v", err)
	}
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"size": 128 << 10}})
	if !errors.Is(err, ErrResponseTooLarge) {
		t.Fatalf("result over the bound: got %v, want response_too_large", err)
	}
}

// TestMCPOverPortModernJSON: a stateless 2026-07-28 go-sdk server answering JSON, negotiated
// by discovery through the port.
func TestMCPOverPortModernJSON(t *testing.T) {
	var rec mcpRecorder
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return newMCPServer() },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	srv := serveOn(t, "127.0.0.5", rec.wrap(h))
	tr := newTransport(t, inCluster(srv.URL+"/mcp"))
	cs, err := connect(t, srv.URL+"/mcp", tr.HTTPClient(), "")
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(lt.Tools) != 1 {
		t.Fatalf("tools/list: %v %v", lt, err)
	}
	_, ctypes := rec.snapshot()
	for _, c := range ctypes {
		if strings.HasPrefix(c, "POST ") && c != "POST application/json" {
			t.Errorf("non-JSON response %q; this test needs JSON responses", c)
		}
	}
}

// TestMCPOverPortRefusedDestination: the MCP client surfaces the port's named refusal.
func TestMCPOverPortRefusedDestination(t *testing.T) {
	var rec mcpRecorder
	srv := serveOn(t, "127.0.0.6", rec.wrap(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return newMCPServer() }, nil)))
	tr := newTransport(t, inCluster(srv.URL+"/mcp"))
	_, err := connect(t, srv.URL+"/mcp", tr.HTTPClient(), "2025-11-25")
	var de *DestinationError
	if !errors.As(err, &de) || de.Reason != "loopback" {
		t.Fatalf("got %v, want destination_refused through go-sdk", err)
	}
	if reqs, _ := rec.snapshot(); len(reqs) != 0 {
		t.Fatalf("server saw %d requests", len(reqs))
	}
}

// TestRoundTripDeclinesOnlyEventStreamGET: a GET for JSON (OAuth metadata, registries) goes
// through; only the server-push stream is declined.
func TestRoundTripDeclinesOnlyEventStreamGET(t *testing.T) {
	var rec recorder
	srv := serveOn(t, "127.0.0.5", rec.wrap(jsonHandler(`{"issuer":"x"}`)))
	hc := newTransport(t, inCluster(srv.URL)).HTTPClient()
	req := get(t, srv.URL+"/.well-known/oauth-protected-resource")
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("JSON GET: %v", err)
	}
	resp.Body.Close()
	req = get(t, srv.URL+"/mcp")
	req.Header.Set("Accept", "text/event-stream")
	resp, err = hc.Do(req)
	if err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("event-stream GET: %v %v", resp, err)
	}
	resp.Body.Close()
	if rec.count(http.MethodGet) != 1 {
		t.Fatalf("server saw %d GETs, want only the JSON one", rec.count(http.MethodGet))
	}
}
