package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	jcs "github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/b10x/connector-mcp/internal/invocation"
	"github.com/b10x/connector-mcp/internal/mcptest"
)

func refusedName(err error) string {
	var we *jsonrpc.Error
	if errors.As(err, &we) && strings.HasPrefix(we.Message, "refused: ") {
		return strings.TrimPrefix(we.Message, "refused: ")
	}
	return ""
}

func canon(t testing.TB, b []byte) string {
	t.Helper()
	c, err := jcs.Transform(b)
	if err != nil {
		t.Fatalf("canonicalize %s: %v", b, err)
	}
	return string(c)
}

// frozenSchemas returns the inputSchema of every frozen descriptor by tool name.
func (w *world) frozenSchemas(t testing.TB) map[string]string {
	out := map[string]string{}
	for _, tool := range w.doc.Snapshot.Tools {
		var d struct {
			InputSchema json.RawMessage `json:"inputSchema"`
		}
		if err := json.Unmarshal(tool.Descriptor.Raw, &d); err != nil {
			t.Fatal(err)
		}
		out[tool.Name] = canon(t, d.InputSchema)
	}
	return out
}

// TestListAndCallBothEras: every combination of client era and upstream era lists the reviewed
// facts with the frozen schemas and effect-derived annotations only, and calls return the
// upstream's result unchanged.
func TestListAndCallBothEras(t *testing.T) {
	for _, up := range []mcptest.Era{mcptest.Modern, mcptest.Legacy} {
		for _, version := range []string{"", "2025-11-25"} {
			t.Run(string(up)+"/"+version, func(t *testing.T) {
				w := newWorld(t, up, nil, "read_file")
				cs := mustConnect(t, w.url+"/mcp/team-a/files", goodTok, version)
				if got, want := cs.InitializeResult().ProtocolVersion, map[string]string{"": "2026-07-28"}[version]; want != "" && got != want {
					t.Fatalf("negotiated %s, want %s", got, want)
				}
				lt, err := cs.ListTools(context.Background(), nil)
				if err != nil {
					t.Fatal(err)
				}
				frozen := w.frozenSchemas(t)
				var names []string
				for _, tool := range lt.Tools {
					names = append(names, tool.Name)
					b, _ := json.Marshal(tool)
					if strings.Contains(string(b), "SERVER-") || strings.Contains(string(b), "idempotentHint\":true") {
						t.Fatalf("server prose or annotations listed: %s", b)
					}
					if tool.Title != "Reviewed "+tool.Name || tool.Description != "Reviewed description of "+tool.Name {
						t.Fatalf("tool %s: title %q description %q are not the reviewed ones", tool.Name, tool.Title, tool.Description)
					}
					sb, _ := json.Marshal(tool.InputSchema)
					if canon(t, sb) != frozen[tool.Name] {
						t.Fatalf("tool %s: inputSchema %s is not the frozen %s", tool.Name, sb, frozen[tool.Name])
					}
					a := tool.Annotations
					wantRO := tool.Name != "transfer"
					if a == nil || a.ReadOnlyHint != wantRO || a.DestructiveHint == nil || *a.DestructiveHint || a.OpenWorldHint != nil || a.Title != "" {
						t.Fatalf("tool %s annotations %+v, want only the reviewed effect's", tool.Name, a)
					}
				}
				if strings.Join(names, ",") != "add,echo,fail,slow,transfer" {
					t.Fatalf("listed %v, want the exposed operations (read_file hidden)", names)
				}
				args := map[string]any{"text": "hi <&> there"}
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: args})
				if err != nil {
					t.Fatal(err)
				}
				direct := mustConnect(t, w.up.URL, "", "") // the upstream in its own era, as the gateway talks to it
				want, err := direct.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: args})
				if err != nil {
					t.Fatal(err)
				}
				gb, _ := json.Marshal(res)
				wb, _ := json.Marshal(want)
				if canon(t, gb) != canon(t, wb) {
					t.Fatalf("result through the gateway %s differs from the upstream's %s", gb, wb)
				}
				if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{}}); refusedName(err) != invocation.RefusalNotExposed {
					t.Fatalf("hidden operation: %v, want not_exposed", err)
				}
			})
		}
	}
}

// requestIDMember is the requestId member a refusal's data ends with.
var requestIDMember = regexp.MustCompile(`,"requestId":"[0-9a-f]{32}"`)

// TestRefusalsNameOnlyTheReason: the must-fail twins of a call, each refused by name, with the
// JSON-RPC error carrying nothing but the refusal (and pointer/keyword for a schema violation).
func TestRefusalsNameOnlyTheReason(t *testing.T) {
	w := newWorld(t, mcptest.Modern, nil)
	cs := mustConnect(t, w.url+"/mcp/team-a/files", goodTok, "")
	cases := []struct {
		tool string
		args any
		want string
		data string
	}{
		{"transfer", map[string]any{"amount": 0, "to": "SECRET-DEST"}, invocation.RefusalInvalidArguments, `{"refusal":"invalid_arguments","pointer":"/amount","keyword":"minimum"}`},
		{"transfer", map[string]any{"amount": 5}, invocation.RefusalInvalidArguments, `{"refusal":"invalid_arguments","pointer":"","keyword":"required"}`},
		{"echo", map[string]any{"text": strings.Repeat("A", 5000)}, invocation.RefusalArgumentTooLarge, `{"refusal":"argument_too_large"}`},
		{"nope", nil, invocation.RefusalNotExposed, `{"refusal":"not_exposed"}`},
	}
	for _, c := range cases {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		var we *jsonrpc.Error
		if refusedName(err) != c.want || !errors.As(err, &we) {
			t.Fatalf("%s: %v, want %s", c.tool, err, c.want)
		}
		data := requestIDMember.ReplaceAllString(string(we.Data), "")
		if !requestIDMember.MatchString(string(we.Data)) {
			t.Fatalf("%s: data %s names no request id", c.tool, we.Data)
		}
		if data != strings.Replace(c.data, `"pointer":"",`, ``, 1) && data != c.data {
			t.Fatalf("%s: data %s, want %s", c.tool, we.Data, c.data)
		}
		if strings.Contains(err.Error(), "SECRET-DEST") || strings.Contains(err.Error(), "AAAA") {
			t.Fatalf("the refusal echoes an argument value: %v", err)
		}
	}
	// A stranger is refused before anything about the deployment is shown.
	st := mustConnect(t, w.url+"/mcp/team-a/files", otherTok, "")
	if _, err := st.ListTools(context.Background(), nil); refusedName(err) != invocation.RefusalForbidden {
		t.Fatalf("stranger list: %v", err)
	}
	// An unknown deployment: forbidden to the stranger, not_active to the agent (who may invoke
	// only team-a/files: another name is forbidden too).
	if _, err := mustConnect(t, w.url+"/mcp/team-b/files", goodTok, "").ListTools(context.Background(), nil); refusedName(err) != invocation.RefusalForbidden {
		t.Fatalf("unknown deployment: %v", err)
	}
}

// reply is the status and header of an HTTP answer (its body already read and closed).
type reply struct {
	StatusCode int
	Header     http.Header
}

func post(t testing.TB, url, token, host, body string) (*reply, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, url, bytes.NewBufferString(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return &reply{StatusCode: resp.StatusCode, Header: resp.Header}, string(b)
}

const pingBody = `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}`

func TestUnauthenticatedIs401(t *testing.T) {
	w := newWorld(t, mcptest.Modern, nil)
	for _, tok := range []string{"", "forged-token"} {
		resp, body := post(t, w.url+"/mcp/team-a/files", tok, "", pingBody)
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != `Bearer realm="connector-mcp", error="invalid_token"` ||
			!strings.Contains(body, `"message":"refused: unauthenticated"`) || (tok != "" && strings.Contains(body, tok)) {
			t.Fatalf("token %q: %d %v %s", tok, resp.StatusCode, resp.Header, body)
		}
	}
	// The twin: the agent's token passes the same request.
	if resp, body := post(t, w.url+"/mcp/team-a/files", goodTok, "", pingBody); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"echo"`) {
		t.Fatalf("agent: %d %s", resp.StatusCode, body)
	}
}

// slowCall starts a call of the upstream's slow tool and waits until it runs upstream.
func slowCall(t testing.TB, w *world, token string) <-chan error {
	t.Helper()
	cs := mustConnect(t, w.url+"/mcp/team-a/files", token, "2025-11-25")
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{}})
		done <- err
	}()
	select {
	case <-w.up.entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the slow call never reached the upstream")
	}
	return done
}

func TestPerCallerLimitIs429(t *testing.T) {
	w := newWorld(t, mcptest.Modern, func(c *Config) { c.MaxInflightPerCaller = 1 })
	done := slowCall(t, w, goodTok)
	resp, body := post(t, w.url+"/mcp/team-a/files", goodTok, "", pingBody)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" || !strings.Contains(body, "refused: caller_busy") {
		t.Fatalf("second request of a busy caller: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	// Another caller is not held up by this one.
	if resp, _ := post(t, w.url+"/mcp/team-a/files", otherTok, "", pingBody); resp.StatusCode != http.StatusOK {
		t.Fatalf("another caller: %d", resp.StatusCode)
	}
	close(w.up.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if resp, _ := post(t, w.url+"/mcp/team-a/files", goodTok, "", pingBody); resp.StatusCode != http.StatusOK {
		t.Fatalf("the caller after its call ended: %d", resp.StatusCode)
	}
}

func TestGlobalLimitIs503(t *testing.T) {
	w := newWorld(t, mcptest.Modern, func(c *Config) { c.MaxInflight = 1 })
	done := slowCall(t, w, goodTok)
	resp, body := post(t, w.url+"/mcp/team-a/files", otherTok, "", pingBody)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" || !strings.Contains(body, "refused: overloaded") {
		t.Fatalf("request over the global limit: %d %s", resp.StatusCode, body)
	}
	close(w.up.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if resp, _ := post(t, w.url+"/mcp/team-a/files", otherTok, "", pingBody); resp.StatusCode != http.StatusOK {
		t.Fatalf("after the running call ended: %d", resp.StatusCode)
	}
}

func TestDrainWaitsForRunningCalls(t *testing.T) {
	w := newWorld(t, mcptest.Modern, nil)
	done := slowCall(t, w, goodTok)
	drained := make(chan error, 1)
	go func() { drained <- w.gw.Drain(context.Background()) }()
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return w.gw.Draining(), nil }); err != nil {
		t.Fatalf("the gateway never started draining: %v", err)
	}
	resp, body := post(t, w.url+"/mcp/team-a/files", otherTok, "", pingBody)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "refused: shutting_down") {
		t.Fatalf("new request while draining: %d %s", resp.StatusCode, body)
	}
	select {
	case err := <-drained:
		t.Fatalf("Drain returned (%v) while a call was running", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(w.up.release)
	if err := <-done; err != nil {
		t.Fatalf("the running call did not complete: %v", err)
	}
	if err := <-drained; err != nil {
		t.Fatal(err)
	}
}

func TestAllowedHosts(t *testing.T) {
	w := newWorld(t, mcptest.Modern, func(c *Config) { c.AllowedHosts = []string{"gateway.connector-mcp.svc"} })
	if resp, body := post(t, w.url+"/mcp/team-a/files", goodTok, "evil.example", pingBody); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "refused: host_not_allowed") {
		t.Fatalf("foreign Host: %d %s", resp.StatusCode, body)
	}
	if resp, body := post(t, w.url+"/mcp/team-a/files", goodTok, "gateway.connector-mcp.svc:8443", pingBody); resp.StatusCode != http.StatusOK {
		t.Fatalf("allowed Host: %d %s", resp.StatusCode, body)
	}
	// Without the list, go-sdk's DNS-rebinding protection refuses a non-loopback Host on loopback.
	w2 := newWorld(t, mcptest.Modern, nil)
	if resp, _ := post(t, w2.url+"/mcp/team-a/files", goodTok, "gateway.connector-mcp.svc", pingBody); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("default protection: %d", resp.StatusCode)
	}
}

func TestMetaRouteInvalidParams(t *testing.T) {
	w := newWorld(t, mcptest.Modern, nil)
	cs := mustConnect(t, w.url+"/mcp", goodTok, "")
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(lt.Tools) != 3 {
		t.Fatalf("meta tools = %+v, %v", lt, err)
	}
	for _, args := range []map[string]any{
		{"namespace": "team-a", "deployment": "files", "operation": "echo", "extra": 1},
		{"namespace": "team-a", "deployment": "files"},
	} {
		if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolDescribeOperation, Arguments: args}); refusedName(err) != RefusalInvalidParams {
			t.Fatalf("describe_operation %v: %v, want invalid_params", args, err)
		}
	}
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "rm_rf", Arguments: map[string]any{}}); refusedName(err) != RefusalUnknownTool {
		t.Fatalf("unknown meta tool: %v", err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolDescribeOperation, Arguments: map[string]any{"namespace": "team-a", "deployment": "files", "operation": "transfer"}})
	if err != nil {
		t.Fatal(err)
	}
	var d OperationDescription
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &d); err != nil || d.Description == nil || d.Effect != "write" || len(d.Lease) != 64 {
		t.Fatalf("describe_operation = %s", b)
	}
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolInvokeOperation, Arguments: map[string]any{
		"namespace": "team-a", "deployment": "files", "operation": "transfer", "lease": d.Lease, "arguments": map[string]any{"amount": 3, "to": "bob"}}})
	if err != nil || res.IsError {
		t.Fatalf("invoke_operation = %+v, %v", res, err)
	}
}

// TestHTTPBounds pins what docs/gateway.md says of the transport: an oversize body is 413, the
// server-push GET stream and DELETE are 405, an unknown path is 404 not_found.
func TestHTTPBounds(t *testing.T) {
	w := newWorld(t, mcptest.Modern, func(c *Config) { c.MaxRequestBytes = 2048 })
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + strings.Repeat("z", 4096) + `"}}}`
	if resp, _ := post(t, w.url+"/mcp/team-a/files", goodTok, "", big); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversize body: %d", resp.StatusCode)
	}
	for _, m := range []string{http.MethodGet, http.MethodDelete} {
		req, _ := http.NewRequestWithContext(context.Background(), m, w.url+"/mcp/team-a/files", nil)
		req.Header.Set("Authorization", "Bearer "+goodTok)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Fatalf("%s: %d, want 405", m, resp.StatusCode)
		}
	}
	if resp, body := post(t, w.url+"/other", goodTok, "", pingBody); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "refused: not_found") {
		t.Fatalf("unknown path: %d %s", resp.StatusCode, body)
	}
	// Features other than tools are refused (go-sdk's "method not found" when no capability is
	// declared, or the gateway's "refused: <feature>"), on both routes.
	for _, route := range []string{"/mcp/team-a/files", "/mcp"} {
		for method, feature := range map[string]string{"prompts/list": "prompts", "resources/list": "resources", "completion/complete": "completion"} {
			_, body := post(t, w.url+route, goodTok, "", `{"jsonrpc":"2.0","id":3,"method":"`+method+`","params":{}}`)
			if !strings.Contains(body, `"code":-32601`) || (!strings.Contains(body, `"refused: `+feature+`"`) && !strings.Contains(body, `method not found`)) {
				t.Fatalf("%s on %s: %s", method, route, body)
			}
		}
	}
	// The twin: a body within the bound is served.
	if resp, _ := post(t, w.url+"/mcp/team-a/files", goodTok, "", pingBody); resp.StatusCode != http.StatusOK {
		t.Fatalf("small body: %d", resp.StatusCode)
	}
}

// TestMetricsAndAudit: a call and a refusal are counted by outcome, cache lookups by result, and
// each call leaves one audit event without arguments.
func TestMetricsAndAudit(t *testing.T) {
	w := newWorld(t, mcptest.Modern, nil)
	cs := mustConnect(t, w.url+"/mcp/team-a/files", goodTok, "")
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "AUDIT-SECRET"}}); err != nil {
		t.Fatal(err)
	}
	_, _ = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "transfer", Arguments: map[string]any{"amount": 0, "to": "x"}})
	m := w.gw.cfg.Metrics
	if got := testutil.ToFloat64(m.Calls.WithLabelValues("deployment", "ok")); got != 1 {
		t.Fatalf("calls{ok} = %v", got)
	}
	if got := testutil.ToFloat64(m.Calls.WithLabelValues("deployment", invocation.RefusalInvalidArguments)); got != 1 {
		t.Fatalf("calls{invalid_arguments} = %v", got)
	}
	if testutil.CollectAndCount(m.CallDuration) != 1 || testutil.ToFloat64(m.InFlight) != 0 {
		t.Fatal("latency histogram or in-flight gauge not kept")
	}
	var invokes []invocation.AuditEvent
	for _, e := range w.audits.all() {
		if e.Action == "invoke" {
			invokes = append(invokes, e)
		}
		if strings.Contains(fmt.Sprintf("%+v", e), "AUDIT-SECRET") {
			t.Fatalf("audit event carries an argument: %+v", e)
		}
	}
	if len(invokes) != 2 || invokes[0].Outcome != "ok" || invokes[1].Outcome != invocation.RefusalInvalidArguments || invokes[0].User == "" || invokes[0].Snapshot == "" {
		t.Fatalf("audit invokes = %+v", invokes)
	}
}
