package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/b10x/connector-mcp/internal/mcptest"
	"github.com/b10x/connector-mcp/snapshot"
)

// A server whose descriptor carries a number RFC 8785 would merge with another (so two
// different descriptors would share a digest) is refused by name when its tools are frozen; the
// twin with a safe number freezes.
func TestUnsafeNumberInDescriptorIsRefused(t *testing.T) {
	list := func(number string) (*snapshot.ToolSnapshot, error) {
		srv := mcptest.StartRawHTTP(&mcptest.Raw{Era: mcptest.Modern, Tools: []json.RawMessage{
			json.RawMessage(`{"name":"transfer","inputSchema":{"type":"object","properties":{"amount":{"type":"integer","maximum":` + number + `}}}}`),
		}})
		defer srv.Close()
		ctx := context.Background()
		s, err := NewClient(nil).Connect(ctx, ServerConfig{HTTP: &HTTPServer{URL: srv.URL}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		return s.ListTools(ctx)
	}
	for _, n := range []string{"9007199254740993", "1e-400", "-0", "1e400"} {
		_, err := list(n)
		var r *snapshot.RefusalError
		if !errors.As(err, &r) || r.Name != "unsafe_number" || !errors.Is(err, snapshot.ErrUnsafeNumber) ||
			r.Tool != "transfer" || r.Path != "/inputSchema/properties/amount/maximum" {
			t.Fatalf("%s: %v", n, err)
		}
	}
	snap, err := list("9007199254740991")
	if err != nil || len(snap.Tools) != 1 {
		t.Fatalf("safe number: %v", err)
	}
}
