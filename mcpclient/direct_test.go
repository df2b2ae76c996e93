package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/b10x/connector-mcp/internal/mcptest"
)

// wireServer wraps the raw engine: it records every POST as received (headers and body bytes),
// can hand out a session id on every answer, and lets a test answer tools/call itself.
type wireServer struct {
	raw       *mcptest.Raw
	sessionID string
	// call, when set, answers tools/call (id is the request's raw id) instead of the raw engine.
	call func(w http.ResponseWriter, r *http.Request, id string)
	// get, when set, answers GET (a resumed stream); the id is the last tools/call's.
	get func(w http.ResponseWriter, r *http.Request, id string)

	mu   sync.Mutex
	last string
	reqs []recordedRequest
}

type recordedRequest struct {
	method string
	id     string
	header http.Header
	body   []byte
}

func (ws *wireServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	_ = json.Unmarshal(body, &m)
	ws.mu.Lock()
	method := m.Method
	if r.Method == http.MethodGet {
		method = "GET"
	}
	ws.reqs = append(ws.reqs, recordedRequest{method: method, id: string(m.ID), header: r.Header.Clone(), body: body})
	if m.Method == "tools/call" {
		ws.last = string(m.ID)
	}
	last := ws.last
	ws.mu.Unlock()
	if r.Method == http.MethodGet && ws.get != nil {
		ws.get(w, r, last)
		return
	}
	if ws.sessionID != "" {
		w.Header().Set("Mcp-Session-Id", ws.sessionID)
	}
	if m.Method == "tools/call" && ws.call != nil {
		ws.call(w, r, string(m.ID))
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	ws.raw.ServeHTTP(w, r)
}

// requests returns the recorded requests with method (all with "").
func (ws *wireServer) requests(method string) []recordedRequest {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	var out []recordedRequest
	for _, r := range ws.reqs {
		if method == "" || r.method == method {
			out = append(out, r)
		}
	}
	return out
}

func (ws *wireServer) start(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(ws)
	t.Cleanup(srv.Close)
	return srv.URL
}

// sdkPath makes s send every tools/call through the go-sdk client.
func sdkPath(s *Session) {
	s.mu.Lock()
	s.noDirect = true
	s.mu.Unlock()
}

// routeTool has x-mcp-header annotations (SEP-2243), one of them nested.
const routeTool = `{"name":"route","inputSchema":{"type":"object","properties":{` +
	`"region":{"type":"string","x-mcp-header":"Region"},` +
	`"count":{"type":"integer","x-mcp-header":"Count"},` +
	`"dry":{"type":"boolean","x-mcp-header":"Dry-Run"},` +
	`"note":{"type":"string","x-mcp-header":"Note"},` +
	`"target":{"type":"object","properties":{"key":{"type":"string","x-mcp-header":"Target-Key"}}}}}}`

var requestIDRe = regexp.MustCompile(`"requestId":("mcpclient-[0-9]+"|[0-9]+)`)

var directIDRe = regexp.MustCompile(`^"mcpclient-[0-9]+"$`)

// normalized renders a request for comparison: the headers (Content-Length dropped: the ids
// differ in length) and the body with the JSON-RPC id replaced.
func (r recordedRequest) normalized() string {
	h := r.header.Clone()
	h.Del("Content-Length")
	var b strings.Builder
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %s\n", k, strings.Join(h[k], ", "))
	}
	body := bytes.Replace(r.body, []byte(`"id":`+r.id), []byte(`"id":ID`), 1)
	body = requestIDRe.ReplaceAll(body, []byte(`"requestId":ID`))
	fmt.Fprintf(&b, "\n%s\n", body)
	return b.String()
}

// TestDirectWire records the HTTP request of the same tools/call sent by the direct path and by
// the go-sdk client, in both eras, with and without x-mcp-header annotations and a session id,
// and asserts they are byte for byte equal but for the JSON-RPC id (and so Content-Length). The
// direct path's requests are pinned in testdata/direct-wire.golden (-update rewrites it).
func TestDirectWire(t *testing.T) {
	// Arguments the SDK re-encodes: whitespace compacted, <>& escaped, a non-ASCII header value
	// (base64), a value that looks like the base64 wrapper, a nested header, a float skipped.
	routeArgs := `{ "region" : "eu-west<1>&", "count": 42, "dry": true, "note": "café  ", "target": {"key": "=?base64?x?="}, "extra": 1.5 }`
	cases := []struct {
		name    string
		era     mcptest.Era
		session string
		tool    string
		args    string
	}{
		{"modern", mcptest.Modern, "", "echo", `{"text":"hi"}`},
		{"modern-session", mcptest.Modern, "sess-1", "echo", `{"text":"hi"}`},
		{"modern-x-mcp-header", mcptest.Modern, "", "route", routeArgs},
		{"modern-x-mcp-header-session", mcptest.Modern, "sess-2", "route", routeArgs},
		{"legacy", mcptest.Legacy, "", "echo", `{"text":"hi"}`},
		{"legacy-session", mcptest.Legacy, "sess-3", "echo", `{"text":"hi"}`},
		{"legacy-x-mcp-header-session", mcptest.Legacy, "sess-4", "route", routeArgs},
	}
	var golden bytes.Buffer
	golden.WriteString("# direct-wire: the tools/call request the direct path sends (id replaced), equal to the go-sdk client's\n")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got [2]recordedRequest
			for i, direct := range []bool{true, false} {
				ws := &wireServer{raw: &mcptest.Raw{Era: c.era, Tools: []json.RawMessage{
					json.RawMessage(`{"name":"echo","inputSchema":{"type":"object"}}`), json.RawMessage(routeTool),
				}}, sessionID: c.session}
				s := connect(t, ServerConfig{HTTP: &HTTPServer{URL: ws.start(t)}})
				if !direct {
					sdkPath(s)
				}
				if _, err := s.CallTool(context.Background(), c.tool, json.RawMessage(c.args)); err != nil {
					t.Fatal(err)
				}
				calls := ws.requests("tools/call")
				if len(calls) != 1 {
					t.Fatalf("%d tools/call requests", len(calls))
				}
				got[i] = calls[0]
			}
			if !directIDRe.MatchString(got[0].id) {
				t.Fatalf("direct path not taken: id %s", got[0].id)
			}
			if directIDRe.MatchString(got[1].id) {
				t.Fatalf("SDK path not taken: id %s", got[1].id)
			}
			d, sdk := got[0].normalized(), got[1].normalized()
			if d != sdk {
				t.Fatalf("direct request differs from the SDK's:\n--- direct\n%s--- sdk\n%s", d, sdk)
			}
			if strings.Contains(c.tool, "route") && (c.era == mcptest.Modern) != (got[0].header.Get("Mcp-Param-Region") != "") {
				t.Fatalf("Mcp-Param-Region = %q in era %s", got[0].header.Get("Mcp-Param-Region"), c.era)
			}
			if c.session != "" && got[0].header.Get("Mcp-Session-Id") != c.session {
				t.Fatalf("Mcp-Session-Id = %q", got[0].header.Get("Mcp-Session-Id"))
			}
			h := got[0].header.Clone()
			for _, k := range []string{"Content-Length", "User-Agent", "Accept-Encoding"} {
				h.Del(k)
			}
			fmt.Fprintf(&golden, "== %s\n%s", c.name, recordedRequest{id: got[0].id, header: h, body: got[0].body}.normalized())
		})
	}
	if !t.Failed() {
		compareGolden(t, "direct-wire", golden.Bytes())
	}
}

// TestDirectWireTwinDiffers is the must-fail twin of TestDirectWire: the comparison sees a
// request that differs from the SDK's in one header.
func TestDirectWireTwinDiffers(t *testing.T) {
	a := recordedRequest{id: `"mcpclient-1"`, header: http.Header{"Mcp-Method": {"tools/call"}}, body: []byte(`{"id":"mcpclient-1"}`)}
	b := recordedRequest{id: `1`, header: http.Header{"Mcp-Method": {"tools/call"}}, body: []byte(`{"id":1}`)}
	if a.normalized() != b.normalized() {
		t.Fatal("equal requests compare unequal")
	}
	b.header.Set("Mcp-Name", "echo")
	if a.normalized() == b.normalized() {
		t.Fatal("a missing Mcp-Name header went unnoticed")
	}
}

// outcome names a CallTool outcome for comparison.
func outcome(res json.RawMessage, err error) string {
	var re *RefusalError
	var fe *FeatureRefusedError
	var te *TransportError
	var se *ServerError
	var tl *ToolError
	switch {
	case err == nil:
		return "ok " + string(res)
	case errors.As(err, &re):
		return "refusal " + re.Name
	case errors.As(err, &fe):
		return "feature " + fe.Feature
	case errors.As(err, &te):
		return fmt.Sprintf("transport %d %v %v", te.Status, te.Err, te.Scopes)
	case errors.As(err, &se):
		return fmt.Sprintf("server %d", se.Code)
	case errors.As(err, &tl):
		return "tool " + string(tl.Result)
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "other " + err.Error()
}

// hostileCall is a tools/call answer of a misbehaving server.
type hostileCall struct {
	name   string
	call   func(w http.ResponseWriter, r *http.Request, id string)
	limits Limits
	// session: the server hands out this session id (a legacy stateful server).
	session string
	// want1 and want2 are the outcomes of two calls in a row.
	want1, want2 string
	// racy2: the SDK fails its connection from a goroutine of its own after the first call
	// returned (a JSON body it could not read), so the second call ends either as the first or
	// with the failed connection; the direct path always fails the connection first.
	racy2 bool
	// get answers GET (stream resumption).
	get func(w http.ResponseWriter, r *http.Request, id string)
	// cancelAfter cancels the caller's context after this long.
	cancelAfter time.Duration
	// answered: the server must have received these messages (method or "response"), in
	// addition to the calls.
	answered []string
}

func sse(w http.ResponseWriter, events ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for _, e := range events {
		_, _ = io.WriteString(w, e)
	}
	w.(http.Flusher).Flush()
}

func echoResult(id string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"ok"}]}}`
}

func hang(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-time.After(30 * time.Second):
	}
}

var hostileCalls = []hostileCall{
	{name: "json result", call: func(w http.ResponseWriter, _ *http.Request, id string) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, echoResult(id))
	}, want1: `ok {"content":[{"type":"text","text":"ok"}]}`, want2: `ok {"content":[{"type":"text","text":"ok"}]}`},
	{name: "sse with progress and log first", call: func(w http.ResponseWriter, _ *http.Request, id string) {
		sse(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n",
			"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"x\"}}\n\n",
			": comment\nevent: message\ndata: "+echoResult(id)+"\n\n")
	}, want1: `ok {"content":[{"type":"text","text":"ok"}]}`, want2: `ok {"content":[{"type":"text","text":"ok"}]}`},
	{name: "oversize frame", limits: Limits{MaxFrameBytes: 4 << 10}, call: func(w http.ResponseWriter, _ *http.Request, id string) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+`,"result":{"content":[{"type":"text","text":"`+strings.Repeat("y", 8<<10)+`"}]}}`)
	}, want1: "refusal frame_too_large", racy2: true},
	{name: "oversize SSE event", limits: Limits{MaxFrameBytes: 4 << 10}, call: func(w http.ResponseWriter, _ *http.Request, id string) {
		sse(w, "data: {\"jsonrpc\":\"2.0\",\"id\":"+id+",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\""+strings.Repeat("y", 8<<10)+"\"}]}}\n\n")
	}, want1: "refusal frame_too_large", want2: "refusal frame_too_large"},
	{name: "oversize result", limits: Limits{MaxResultBytes: 1 << 10}, call: func(w http.ResponseWriter, _ *http.Request, id string) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+`,"result":{"content":[{"type":"text","text":"`+strings.Repeat("y", 2<<10)+`"}]}}`)
	}, want1: "refusal result_too_large", want2: "refusal result_too_large"},
	{name: "duplicate member", call: func(w http.ResponseWriter, _ *http.Request, id string) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+`,"result":{"isError":false,"isError":true}}`)
	}, want1: "refusal duplicate_key", racy2: true},
	{name: "duplicate member in SSE", call: func(w http.ResponseWriter, _ *http.Request, id string) {
		sse(w, "data: {\"jsonrpc\":\"2.0\",\"id\":"+id+",\"id\":"+id+",\"result\":{}}\n\n")
	}, want1: "refusal duplicate_key", want2: "refusal duplicate_key"},
	{name: "wrong id", limits: Limits{CallTimeout: 300 * time.Millisecond}, call: func(w http.ResponseWriter, _ *http.Request, _ string) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, echoResult(`"someone-else"`))
	}, want1: "refusal call_timeout", want2: "refusal call_timeout", answered: []string{"notifications/cancelled"}},
	{name: "SSE with garbage", call: func(w http.ResponseWriter, _ *http.Request, _ string) {
		sse(w, "data: <html>not json</html>\n\n")
	}, want1: "refusal invalid_json", want2: "refusal invalid_json"},
	{name: "response never arrives", limits: Limits{CallTimeout: 300 * time.Millisecond}, call: func(w http.ResponseWriter, r *http.Request, _ string) {
		sse(w, ": waiting\n\n")
		hang(r)
	}, want1: "refusal call_timeout", want2: "refusal call_timeout", answered: []string{"notifications/cancelled"}},
	{name: "stream ends without response", call: func(w http.ResponseWriter, _ *http.Request, _ string) {
		sse(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n")
	}, want1: "transport 0 connection closed []", want2: "transport 0 connection closed []"},
	{name: "stream resumed with Last-Event-ID", call: func(w http.ResponseWriter, _ *http.Request, _ string) {
		sse(w, "id: ev-1\nretry: 10\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n")
	}, get: func(w http.ResponseWriter, r *http.Request, id string) {
		if r.Header.Get("Last-Event-ID") != "ev-1" || r.Header.Get("Accept") != "text/event-stream" {
			http.Error(w, "bad resume", http.StatusBadRequest)
			return
		}
		sse(w, "id: ev-2\ndata: "+echoResult(id)+"\n\n")
	}, want1: `ok {"content":[{"type":"text","text":"ok"}]}`, want2: `ok {"content":[{"type":"text","text":"ok"}]}`, answered: []string{"GET"}},
	{name: "resumption refused", call: func(w http.ResponseWriter, _ *http.Request, _ string) {
		sse(w, "id: ev-1\nretry: 10\n\n")
	}, get: func(w http.ResponseWriter, _ *http.Request, _ string) {
		http.Error(w, "no", http.StatusMethodNotAllowed)
	}, want1: "transport 405 unexpected HTTP status []", want2: "transport 0 connection closed []", answered: []string{"GET"}},
	{name: "session gone", session: "sess-gone", call: func(w http.ResponseWriter, _ *http.Request, _ string) {
		http.Error(w, "session not found", http.StatusNotFound)
	}, want1: "transport 404 unexpected HTTP status []", want2: "transport 0 connection closed []"},
	{name: "unauthorized", call: func(w http.ResponseWriter, _ *http.Request, _ string) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="x"`)
		http.Error(w, "no", http.StatusUnauthorized)
	}, want1: "transport 401 server requires authorization []", want2: "transport 0 connection closed []"},
	{name: "insufficient scope", call: func(w http.ResponseWriter, _ *http.Request, _ string) {
		w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope", scope="tools:call admin"`)
		http.Error(w, "no", http.StatusForbidden)
	}, want1: "transport 403 server requires a scope the credential lacks [tools:call admin]", want2: "transport 0 connection closed []"},
	{name: "transient 503", call: func(w http.ResponseWriter, _ *http.Request, _ string) {
		http.Error(w, "busy", http.StatusServiceUnavailable)
	}, want1: "transport 503 unexpected HTTP status []", want2: "transport 503 unexpected HTTP status []"},
	{name: "JSON-RPC error with 400", call: func(w http.ResponseWriter, _ *http.Request, id string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+`,"error":{"code":-32602,"message":"secret prose"}}`)
	}, want1: "server -32602", want2: "server -32602"},
	{name: "unsupported content type", call: func(w http.ResponseWriter, _ *http.Request, id string) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, echoResult(id))
	}, want1: "transport 0 connection closed []", want2: "transport 0 connection closed []"},
	{name: "malformed SSE line", call: func(w http.ResponseWriter, r *http.Request, _ string) {
		sse(w, "garbage line\n\n")
		hang(r)
	}, want1: "transport 0 connection closed []", want2: "transport 0 connection closed []"},
	{name: "server request mid-stream", call: func(w http.ResponseWriter, r *http.Request, _ string) {
		sse(w, "data: {\"jsonrpc\":\"2.0\",\"id\":\"srv-1\",\"method\":\"sampling/createMessage\",\"params\":{\"messages\":[],\"maxTokens\":1}}\n\n")
		hang(r)
	}, want1: "feature sampling", want2: "feature sampling", answered: []string{"response", "notifications/cancelled"}},
	{name: "ping mid-stream", call: func(w http.ResponseWriter, _ *http.Request, id string) {
		sse(w, "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}\n\n", "data: "+echoResult(id)+"\n\n")
	}, want1: `ok {"content":[{"type":"text","text":"ok"}]}`, want2: `ok {"content":[{"type":"text","text":"ok"}]}`, answered: []string{"response"}},
	{name: "isError result", call: func(w http.ResponseWriter, _ *http.Request, id string) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+`,"result":{"content":[],"isError":true}}`)
	}, want1: `tool {"content":[],"isError":true}`, want2: `tool {"content":[],"isError":true}`},
	{name: "caller cancels", cancelAfter: 200 * time.Millisecond, call: func(w http.ResponseWriter, r *http.Request, _ string) {
		sse(w, ": waiting\n\n")
		hang(r)
	}, want1: "canceled", want2: "canceled", answered: []string{"notifications/cancelled"}},
}

// TestDirectHostile runs every hostile tools/call answer against the direct path and the SDK
// path, two calls in a row each: both must end in the named outcome given, and the server must
// have received the same answers (server-request responses, notifications/cancelled).
func TestDirectHostile(t *testing.T) {
	for _, c := range hostileCalls {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var outcomes [2][2]string
			var sent [2][]string
			for i, direct := range []bool{true, false} {
				era := mcptest.Modern
				if c.session != "" {
					era = mcptest.Legacy
				}
				ws := &wireServer{raw: &mcptest.Raw{Era: era}, sessionID: c.session, call: c.call, get: c.get}
				lim := c.limits
				s := connect(t, ServerConfig{HTTP: &HTTPServer{URL: ws.start(t)}, Limits: lim})
				if !direct {
					sdkPath(s)
				}
				for k := range 2 {
					ctx, cancel := context.WithCancel(context.Background())
					if c.cancelAfter > 0 {
						time.AfterFunc(c.cancelAfter, cancel)
					}
					res, err := s.CallTool(ctx, "echo", json.RawMessage(`{"text":"hi"}`))
					cancel()
					outcomes[i][k] = outcome(res, err)
				}
				calls := ws.requests("tools/call")
				if len(calls) == 0 {
					t.Fatal("no tools/call reached the server")
				}
				if got := directIDRe.MatchString(calls[0].id); got != direct {
					t.Fatalf("direct=%v but the call id is %s", direct, calls[0].id)
				}
				for _, want := range c.answered {
					if !eventually(func() bool { return hasMessage(ws, want) }) {
						t.Errorf("direct=%v: the server never received %s", direct, want)
					}
				}
				settle(ws)
				for _, r := range ws.requests("") {
					if r.method != "tools/call" && r.method != "tools/list" && r.method != "GET" && r.method != "server/discover" && r.method != "initialize" && r.method != "notifications/initialized" {
						sent[i] = append(sent[i], r.normalized())
					}
				}
			}
			if c.racy2 {
				const closed = "transport 0 connection closed []"
				if outcomes[0][1] != closed || (outcomes[1][1] != closed && outcomes[1][1] != c.want1) {
					t.Fatalf("second outcomes: direct %q, sdk %q", outcomes[0][1], outcomes[1][1])
				}
				outcomes[0][1], outcomes[1][1], c.want2 = "", "", ""
			}
			if outcomes[0] != outcomes[1] {
				t.Fatalf("outcomes differ:\n direct %q\n sdk    %q", outcomes[0], outcomes[1])
			}
			if outcomes[0] != [2]string{c.want1, c.want2} {
				t.Fatalf("outcomes %q, want %q, %q", outcomes[0], c.want1, c.want2)
			}
			// The SDK answers server requests and sends notifications concurrently: compare as sets.
			if c.racy2 {
				return // whether the SDK's notifications/cancelled beat its connection failure is a race
			}
			slices.Sort(sent[0])
			slices.Sort(sent[1])
			if !slices.Equal(sent[0], sent[1]) {
				t.Errorf("the server received other messages:\n--- direct\n%s\n--- sdk\n%s", strings.Join(sent[0], "\n"), strings.Join(sent[1], "\n"))
			}
		})
	}
}

func hasMessage(ws *wireServer, want string) bool {
	for _, r := range ws.requests("") {
		if r.method == want || (want == "response" && r.method == "" && bytes.Contains(r.body, []byte(`"srv-1"`)) || want == "response" && r.method == "" && bytes.Contains(r.body, []byte(`"id":7`))) {
			return true
		}
	}
	return false
}

// settle waits until the server has received nothing new for 300 ms (the SDK sends responses
// and notifications/cancelled from goroutines of its own), at most 5 s.
func settle(ws *wireServer) {
	n, quiet := -1, 0
	for range 100 {
		if m := len(ws.requests("")); m != n {
			n, quiet = m, 0
		} else if quiet++; quiet == 6 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func eventually(f func() bool) bool {
	for range 100 {
		if f() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// staticBearer is an OAuth handler with a fixed token.
type staticBearer struct{}

func (staticBearer) TokenSource(context.Context) (oauth2.TokenSource, error) {
	return oauth2.StaticTokenSource(&oauth2.Token{AccessToken: "t"}), nil
}

func (staticBearer) Authorize(context.Context, *http.Request, *http.Response) error {
	return errors.New("no")
}

// TestDirectPathChoice pins which calls take the direct path: a plain HTTP session does; an OAuth
// handler, a watched tool list, a tools/list the SDK caches (ttlMs) and a list_changed the SDK
// received (until the next ListTools) keep the SDK path.
func TestDirectPathChoice(t *testing.T) {
	call := func(t *testing.T, s *Session, ws *wireServer) bool {
		t.Helper()
		if _, err := s.CallTool(context.Background(), "echo", json.RawMessage(`{"text":"x"}`)); err != nil {
			t.Fatal(err)
		}
		calls := ws.requests("tools/call")
		return directIDRe.MatchString(calls[len(calls)-1].id)
	}
	cases := []struct {
		name   string
		raw    mcptest.Raw
		cfg    func(*HTTPServer, *ServerConfig)
		direct bool
	}{
		{name: "plain modern", raw: mcptest.Raw{Era: mcptest.Modern}, direct: true},
		{name: "plain legacy", raw: mcptest.Raw{Era: mcptest.Legacy}, direct: true},
		{name: "OAuth handler", raw: mcptest.Raw{Era: mcptest.Modern}, cfg: func(h *HTTPServer, _ *ServerConfig) { h.OAuthHandler = staticBearer{} }},
		{name: "watched tool list", raw: mcptest.Raw{Era: mcptest.Modern}, cfg: func(_ *HTTPServer, c *ServerConfig) { c.WatchToolListChanged = true }},
		{name: "cached tools/list", raw: mcptest.Raw{Era: mcptest.Modern, TTLMs: 60000}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ws := &wireServer{raw: &c.raw}
			cfg := ServerConfig{HTTP: &HTTPServer{URL: ws.start(t)}}
			if c.cfg != nil {
				c.cfg(cfg.HTTP, &cfg)
			}
			s := connect(t, cfg)
			if got := call(t, s, ws); got != c.direct {
				t.Fatalf("direct = %v, want %v", got, c.direct)
			}
		})
	}
	t.Run("list_changed seen by the SDK", func(t *testing.T) {
		var notify atomic.Bool
		ws := &wireServer{raw: &mcptest.Raw{Era: mcptest.Modern}}
		ws.call = func(w http.ResponseWriter, _ *http.Request, id string) {
			if notify.Load() {
				sse(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n", "data: "+echoResult(id)+"\n\n")
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, echoResult(id))
		}
		s := connect(t, ServerConfig{HTTP: &HTTPServer{URL: ws.start(t)}})
		if !call(t, s, ws) {
			t.Fatal("the first call did not take the direct path")
		}
		// An SDK-path call whose stream carries the notification: the SDK empties its tool cache.
		sdkPath(s)
		notify.Store(true)
		if call(t, s, ws) {
			t.Fatal("sdkPath did not force the SDK path")
		}
		// The SDK handles the notification from a goroutine of its own, after the call returns.
		if !eventually(func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.sdkToolsCleared }) {
			t.Fatal("the SDK's list_changed was not noticed")
		}
		s.mu.Lock()
		s.noDirect = false
		s.mu.Unlock()
		notify.Store(false)
		if call(t, s, ws) {
			t.Fatal("a call after the SDK's list_changed took the direct path")
		}
		if _, err := s.ListTools(context.Background()); err != nil {
			t.Fatal(err)
		}
		if !call(t, s, ws) {
			t.Fatal("a call after a new ListTools did not take the direct path")
		}
	})
}

// TestDirectBesideSDK runs direct tools/calls and SDK requests (ListTools) on one session at once
// against a real go-sdk server in each era: every one succeeds, and the SDK's session is
// undisturbed by the requests it never saw (its own ids, session id and listing stay coherent).
func TestDirectBesideSDK(t *testing.T) {
	for _, era := range []mcptest.Era{mcptest.Modern, mcptest.Legacy} {
		t.Run(string(era), func(t *testing.T) {
			srv := mcptest.StartHTTP(mcptest.NewServer("beside", mcptest.DefaultTools()), era)
			t.Cleanup(srv.Close)
			s := connect(t, ServerConfig{HTTP: &HTTPServer{URL: srv.URL}})
			if _, err := s.ListTools(context.Background()); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			errs := make(chan error, 64)
			for i := range 8 {
				wg.Go(func() {
					for range 10 {
						var err error
						if i%4 == 0 {
							_, err = s.ListTools(context.Background())
						} else {
							var res json.RawMessage
							res, err = s.CallTool(context.Background(), "echo", json.RawMessage(`{"text":"beside"}`))
							if err == nil && !bytes.Contains(res, []byte("beside")) {
								err = fmt.Errorf("result %s", res)
							}
						}
						if err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if s.broken.Load() || !s.directUsable() {
				t.Fatal("the session left the direct path")
			}
		})
	}
}
