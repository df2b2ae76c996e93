package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"

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
			path := filepath.Join("testdata", c.name+".golden")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
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
		})
	}
}
