package mcpclient

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"

	"github.com/b10x/connector-mcp/internal/mcptest"
)

type wireRecord struct {
	method string
	params json.RawMessage
	header http.Header
}

type wireLog struct {
	mu   sync.Mutex
	reqs []wireRecord
}

func (w *wireLog) record(method string, params json.RawMessage, h http.Header) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reqs = append(w.reqs, wireRecord{method, params, h})
}

func (w *wireLog) find(method string) (wireRecord, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.reqs {
		if r.method == method {
			return r, true
		}
	}
	return wireRecord{}, false
}

// TestWireModern pins what the client sends at 2026-07-28: server/discover with the _meta
// protocol version, client info and empty client capabilities; per-request _meta and MCP headers
// on tools/list and tools/call.
func TestWireModern(t *testing.T) {
	var log wireLog
	srv := mcptest.StartRawHTTP(&mcptest.Raw{Era: mcptest.Modern, OnRequest: log.record})
	t.Cleanup(srv.Close)
	s := connect(t, ServerConfig{HTTP: &HTTPServer{URL: srv.URL}})
	ctx := context.Background()
	if _, err := s.CallTool(ctx, "echo", json.RawMessage(`{"text":"x"}`)); err != nil {
		t.Fatal(err)
	}
	d, ok := log.find("server/discover")
	if !ok {
		t.Fatal("no server/discover")
	}
	var dp struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	_ = json.Unmarshal(d.params, &dp)
	if string(dp.Meta["io.modelcontextprotocol/protocolVersion"]) != `"2026-07-28"` ||
		string(dp.Meta["io.modelcontextprotocol/clientCapabilities"]) != `{}` ||
		dp.Meta["io.modelcontextprotocol/clientInfo"] == nil {
		t.Fatalf("discover _meta = %s", d.params)
	}
	for _, m := range []string{"tools/list", "tools/call"} {
		r, ok := log.find(m)
		if !ok {
			t.Fatalf("no %s", m)
		}
		var p struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		}
		_ = json.Unmarshal(r.params, &p)
		if string(p.Meta["io.modelcontextprotocol/protocolVersion"]) != `"2026-07-28"` {
			t.Errorf("%s without _meta protocol version: %s", m, r.params)
		}
		if r.header.Get("Mcp-Method") != m || r.header.Get("MCP-Protocol-Version") != "2026-07-28" {
			t.Errorf("%s headers: Mcp-Method %q, MCP-Protocol-Version %q", m, r.header.Get("Mcp-Method"), r.header.Get("MCP-Protocol-Version"))
		}
	}
	if r, _ := log.find("tools/call"); r.header.Get("Mcp-Name") != "echo" {
		t.Errorf("tools/call Mcp-Name = %q", r.header.Get("Mcp-Name"))
	}
}

// TestWireLegacy pins the fallback: initialize at 2025-11-25 advertising no capabilities (no
// roots), then MCP-Protocol-Version on later requests.
func TestWireLegacy(t *testing.T) {
	var log wireLog
	srv := mcptest.StartRawHTTP(&mcptest.Raw{Era: mcptest.Legacy, OnRequest: log.record})
	t.Cleanup(srv.Close)
	s := connect(t, ServerConfig{HTTP: &HTTPServer{URL: srv.URL}})
	if _, err := s.ListTools(context.Background()); err != nil {
		t.Fatal(err)
	}
	r, ok := log.find("initialize")
	if !ok {
		t.Fatal("no initialize")
	}
	var p struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
	}
	_ = json.Unmarshal(r.params, &p)
	if p.ProtocolVersion != "2025-11-25" || string(p.Capabilities) != `{}` {
		t.Fatalf("initialize params = %s", r.params)
	}
	if _, ok := log.find("notifications/initialized"); !ok {
		t.Error("no notifications/initialized")
	}
	if l, _ := log.find("tools/list"); l.header.Get("MCP-Protocol-Version") != "2025-11-25" {
		t.Errorf("tools/list MCP-Protocol-Version = %q", l.header.Get("MCP-Protocol-Version"))
	}
}
