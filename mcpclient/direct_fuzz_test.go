package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/b10x/connector-mcp/internal/mcptest"
)

// FuzzDirectResponse feeds arbitrary tools/call answers (a JSON body or an event stream; "ID"
// in the input stands for the request's id) to the direct path's response reader. Properties:
// it takes the direct path; a success returns bytes the server sent, as a JSON object; a failure
// is one of this package's typed outcomes and never carries server text.
func FuzzDirectResponse(f *testing.F) {
	seeds := []struct {
		sse  bool
		body string
	}{
		{false, `{"jsonrpc":"2.0","id":ID,"result":{"content":[{"type":"text","text":"ok"}]}}`},
		{false, `{"jsonrpc":"2.0","id":ID,"result":{"isError":true,"content":[]}}`},
		{false, `{"jsonrpc":"2.0","id":ID,"error":{"code":-32000,"message":"SECRET-PROSE"}}`},
		{false, `{"jsonrpc":"2.0","id":ID,"result":{"a":1,"a":2}}`},
		{false, `[{"jsonrpc":"2.0","id":ID,"result":{}}]`},
		{false, `SECRET-PROSE not json`},
		{true, "data: {\"jsonrpc\":\"2.0\",\"id\":ID,\"result\":{}}\n\n"},
		{true, "id: 1\nretry: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":ID,\"result\":{\"resultType\":\"task\"}}\n\n"},
		{true, "data: {\"jsonrpc\":\"2.0\",\"id\":\"s\",\"method\":\"roots/list\"}\n\n"},
		{true, "data: {\"jsonrpc\":\"2.0\",\"id\":\"s\",\"method\":\"ping\"}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":ID,\"result\":{}}\n\n"},
		{true, "event: other\ndata: SECRET-PROSE\n\nno colon SECRET-PROSE\n\n"},
		{true, "data: {\"jsonrpc\":\"2.0\",\n data: \"id\":ID,\"result\":{}}\n\n"},
	}
	for _, s := range seeds {
		f.Add(s.sse, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, sse bool, body []byte) {
		ws := &wireServer{raw: &mcptest.Raw{Era: mcptest.Modern}, call: func(w http.ResponseWriter, _ *http.Request, id string) {
			out := bytes.ReplaceAll(body, []byte("ID"), []byte(id))
			if sse {
				w.Header().Set("Content-Type", "text/event-stream")
			} else {
				w.Header().Set("Content-Type", "application/json")
			}
			_, _ = w.Write(out)
		}}
		s := connect(t, ServerConfig{HTTP: &HTTPServer{URL: ws.start(t)}, Limits: Limits{CallTimeout: 100 * time.Millisecond, MaxFrameBytes: 64 << 10}})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		res, err := s.CallTool(ctx, "echo", json.RawMessage(`{}`))
		calls := ws.requests("tools/call")
		if len(calls) != 1 || !directIDRe.MatchString(calls[0].id) {
			t.Fatalf("the direct path was not taken: %d calls", len(calls))
		}
		if err == nil {
			if !bytes.Contains(body, res) || !json.Valid(res) || bytes.TrimSpace(res)[0] != '{' {
				t.Fatalf("success with bytes the server did not send as an object: %q", res)
			}
			return
		}
		var re *RefusalError
		var fe *FeatureRefusedError
		var te *TransportError
		var se *ServerError
		var tl *ToolError
		if !errors.As(err, &re) && !errors.As(err, &fe) && !errors.As(err, &te) && !errors.As(err, &se) && !errors.As(err, &tl) {
			t.Fatalf("untyped outcome %T: %v", err, err)
		}
		if strings.Contains(err.Error(), "SECRET") {
			t.Fatalf("server text in the error: %v", err)
		}
	})
}
