package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/b10x/connector-mcp/internal/mcptest"
)

// rawCall is one hand-written HTTP request to the per-deployment route.
type rawCall struct {
	name    string
	version string            // MCP-Protocol-Version
	headers map[string]string // extra headers
	host    string            // Host header ("": the URL's)
	body    string
}

// modernCall is the body a 2026-07-28 go-sdk client sends for tools/call.
func modernCall(id, tool, args string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{},` +
		`"io.modelcontextprotocol/clientInfo":{"name":"agent","version":"1"},"io.modelcontextprotocol/protocolVersion":"2026-07-28"},` +
		`"name":"` + tool + `","arguments":` + args + `}}`
}

func legacyCall(id, tool, args string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`
}

func (c rawCall) request(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, strings.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+goodTok)
	req.Header.Set("MCP-Protocol-Version", c.version)
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	if c.host != "" {
		req.Host = c.host
	}
	return req
}

// answer is what a client sees of one response.
type answer struct {
	status                    int
	contentType, cacheControl string
	body                      string
	// requestID is the RequestIDHeader of the answer (the go-sdk-only path is handed it).
	requestID string
}

// viaGateway sends c through the gateway's HTTP handler on loopback (authentication, limits,
// then the direct path or the go-sdk server).
func viaGateway(t *testing.T, w *world, c rawCall) answer {
	t.Helper()
	resp, err := http.DefaultClient.Do(c.request(t, w.url+"/mcp/team-a/files"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"), string(b), resp.Header.Get(RequestIDHeader)}
}

// viaSDK sends c to the gateway's go-sdk server only (the path every request took before the
// direct path existed), for the same authenticated caller and route, under request id.
func viaSDK(t *testing.T, w *world, c rawCall, id string) answer {
	t.Helper()
	caller, err := w.gw.cfg.Authenticator.Authenticate(context.Background(), goodTok)
	if err != nil {
		t.Fatal(err)
	}
	req := c.request(t, "http://127.0.0.1/mcp/team-a/files")
	req = req.WithContext(context.WithValue(req.Context(), ctxKey{}, &reqInfo{caller: caller, route: route{ns: testNS, name: testName},
		trail: &trail{id: id, span: trace.SpanFromContext(context.Background())}}))
	rec := httptest.NewRecorder()
	w.gw.mcpH.ServeHTTP(rec, req)
	return answer{rec.Code, rec.Header().Get("Content-Type"), rec.Header().Get("Cache-Control"), rec.Body.String(), id}
}

// TestDirectCallAnswersAsSDK: the common tools/call shape of both eras is answered below the
// go-sdk server (counted in DirectCalls) with exactly the answer the go-sdk server gives to the
// same request: status, content type, cache control and body, for a result, a tool error, a
// schema refusal, an oversize argument, a hidden operation and an unknown one.
func TestDirectCallAnswersAsSDK(t *testing.T) {
	w := newWorld(t, mcptest.Modern, nil, "add")
	modernHeaders := func(tool string) map[string]string {
		return map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": tool}
	}
	var calls []rawCall
	for _, tc := range []struct{ tool, args string }{
		{"echo", `{"text":"hello"}`},
		{"fail", `{}`},
		{"transfer", `{"amount":0,"to":"x"}`},
		{"echo", `{"text":"` + strings.Repeat("a", 5000) + `"}`},
		{"add", `{"a":1,"b":2}`},
		{"nope", `{}`},
	} {
		calls = append(calls,
			rawCall{name: "modern " + tc.tool, version: "2026-07-28", headers: modernHeaders(tc.tool), body: modernCall("11", tc.tool, tc.args)},
			rawCall{name: "legacy " + tc.tool, version: "2025-11-25", body: legacyCall(`"req-12"`, tc.tool, tc.args)})
	}
	for _, c := range calls {
		before := testutil.ToFloat64(w.gw.cfg.Metrics.DirectCalls)
		got := viaGateway(t, w, c)
		if testutil.ToFloat64(w.gw.cfg.Metrics.DirectCalls) != before+1 {
			t.Fatalf("%s: not answered on the direct path", c.name)
		}
		if len(got.requestID) != 32 {
			t.Fatalf("%s: request id header %q", c.name, got.requestID)
		}
		if strings.Contains(got.body, `"error"`) && !strings.Contains(got.body, `"requestId":"`+got.requestID+`"`) {
			t.Fatalf("%s: the refusal does not name the request id %s: %s", c.name, got.requestID, got.body)
		}
		want := viaSDK(t, w, c, got.requestID)
		if got != want {
			t.Fatalf("%s: direct answer differs from the go-sdk server's\n got: %+v\nwant: %+v", c.name, got, want)
		}
	}
	// The result member is the upstream's result JSON byte for byte.
	got := viaGateway(t, w, calls[0])
	var env struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal([]byte(got.body), &env); err != nil || !bytes.Contains(env.Result, []byte(`"text":"{\"text\":\"hello\"}"`)) {
		t.Fatalf("direct result = %s", got.body)
	}
}

// TestDirectCallDeclines is the twin: a request that is not exactly the common shape is left to
// the go-sdk server (DirectCalls unchanged), which answers it as before, each with its own
// reason; duplicate member names never reach the upstream at all.
func TestDirectCallDeclines(t *testing.T) {
	w := newWorld(t, mcptest.Modern, nil)
	hdr := map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "echo"}
	for _, tc := range []struct {
		c    rawCall
		want string // a substring of the go-sdk server's answer
	}{
		{rawCall{name: "Mcp-Name mismatch", version: "2026-07-28", headers: map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "fail"}, body: modernCall("1", "echo", `{}`)}, "header mismatch"},
		{rawCall{name: "no Mcp-Method", version: "2026-07-28", headers: map[string]string{"Mcp-Name": "echo"}, body: modernCall("1", "echo", `{}`)}, "missing required Mcp-Method"},
		{rawCall{name: "_meta version differs from header", version: "2026-07-28", headers: hdr,
			body: strings.Replace(modernCall("1", "echo", `{}`), `protocolVersion":"2026-07-28"`, `protocolVersion":"2026-07-29"`, 1)}, "does not match"},
		{rawCall{name: "no client capabilities", version: "2026-07-28", headers: hdr,
			body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"echo","arguments":{}}}`}, "clientCapabilities"},
		// Twice: the second verdict comes from the client-meta cache and must be the same.
		{rawCall{name: "client capabilities of the wrong type", version: "2026-07-28", headers: hdr,
			body: strings.Replace(modernCall("1", "echo", `{}`), `clientCapabilities":{}`, `clientCapabilities":{"roots":5}`, 1)}, "clientCapabilities"},
		{rawCall{name: "client capabilities of the wrong type, again", version: "2026-07-28", headers: hdr,
			body: strings.Replace(modernCall("1", "echo", `{}`), `clientCapabilities":{}`, `clientCapabilities":{"roots":5}`, 1)}, "clientCapabilities"},
		{rawCall{name: "client info of the wrong type", version: "2026-07-28", headers: hdr,
			body: strings.Replace(modernCall("1", "echo", `{}`), `"name":"agent"`, `"name":7`, 1)}, "clientInfo"},
		{rawCall{name: "legacy request carrying the modern _meta", version: "2025-11-25",
			body: modernCall("1", "echo", `{}`)}, "does not match"},
		{rawCall{name: "duplicate name member", version: "2025-11-25",
			body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","name":"transfer","arguments":{}}}`}, ""},
		// go-sdk's DNS-rebinding protection: a loopback listener answers only loopback names.
		{rawCall{name: "non-loopback Host on a loopback listener", version: "2026-07-28", headers: hdr, host: "evil.example",
			body: modernCall("1", "echo", `{}`)}, "invalid Host header"},
		{rawCall{name: "batch", version: "2025-11-25", body: `[` + legacyCall("1", "echo", `{}`) + `]`}, "batching is not supported"},
		{rawCall{name: "tools/list", version: "2025-11-25", body: pingBody}, `"tools":[`},
	} {
		before := testutil.ToFloat64(w.gw.cfg.Metrics.DirectCalls)
		callsBefore := testutil.ToFloat64(w.gw.cfg.Metrics.Calls.WithLabelValues("deployment", "ok"))
		got := viaGateway(t, w, tc.c)
		if testutil.ToFloat64(w.gw.cfg.Metrics.DirectCalls) != before {
			t.Fatalf("%s: answered on the direct path", tc.c.name)
		}
		if !strings.Contains(got.body, tc.want) {
			t.Fatalf("%s: %d %s, want it to contain %q", tc.c.name, got.status, got.body, tc.want)
		}
		if tc.c.name == "duplicate name member" && (got.status == http.StatusOK && strings.Contains(got.body, `"result"`) ||
			testutil.ToFloat64(w.gw.cfg.Metrics.Calls.WithLabelValues("deployment", "ok")) != callsBefore) {
			t.Fatalf("%s: a call ran: %d %s", tc.c.name, got.status, got.body)
		}
	}
}
