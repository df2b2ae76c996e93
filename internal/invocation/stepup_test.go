package invocation_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"encoding/json"

	"github.com/b10x/connector-mcp/internal/invocation"
	"github.com/b10x/connector-mcp/internal/mcptest"
)

// A call the upstream answers 403 insufficient_scope is refused by name (a human logs in again
// with the scope; nothing escalates), never as a generic call failure and never with the
// challenge's prose. Twin: the same surface calls through once the upstream accepts again.
func TestCallInsufficientScopeIsRefusedByName(t *testing.T) {
	var forbid atomic.Bool
	inner := mcptest.HTTPHandler(mcptest.NewServer("files", testTools()), mcptest.Modern)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if forbid.Load() && strings.Contains(string(body), `"tools/call"`) {
			w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope", scope="files:write", error_description="SECRET-PROSE"`)
			http.Error(w, "SECRET-PROSE", http.StatusForbidden)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	api := &fakeAPIServer{allow: map[string]bool{alice.User: true}}
	doc := freeze(t, ts.URL)
	s, err := invocation.NewSurface(doc, deployment(doc, ts.URL), loopbackOptions(api))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })

	forbid.Store(true)
	_, err = s.Call(context.Background(), alice, "add", "files", json.RawMessage(`{"a":1,"b":2}`))
	if refusal(err) != invocation.RefusalInsufficientScope {
		t.Fatalf("err = %v (refusal %q), want %s", err, refusal(err), invocation.RefusalInsufficientScope)
	}
	if strings.Contains(err.Error(), "SECRET-PROSE") {
		t.Fatalf("the refusal carries the upstream's prose: %v", err)
	}
	forbid.Store(false)
	if _, err := s.Call(context.Background(), alice, "add", "files", json.RawMessage(`{"a":1,"b":2}`)); err != nil {
		t.Fatalf("after the upstream accepts again: %v", err)
	}
}
