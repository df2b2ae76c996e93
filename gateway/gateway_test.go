package gateway

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/b10x/connector-mcp/internal/mcptest"
)

func TestListAndCallBothEras(t *testing.T) {
	for _, up := range []mcptest.Era{mcptest.Modern, mcptest.Legacy} {
		for _, version := range []string{"", "2025-11-25"} {
			t.Run(string(up)+"/"+version, func(t *testing.T) {
				w := newWorld(t, up, nil)
				cs := mustConnect(t, w.url+"/mcp/team-a/files", goodTok, version)
				t.Logf("negotiated %s", cs.InitializeResult().ProtocolVersion)
				lt, err := cs.ListTools(context.Background(), nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, tool := range lt.Tools {
					b, _ := json.Marshal(tool)
					t.Logf("%s", b)
				}
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
				if err != nil {
					t.Fatal(err)
				}
				b, _ := json.Marshal(res)
				t.Logf("result %s", b)
			})
		}
	}
}
