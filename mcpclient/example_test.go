package mcpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/b10x/connector-mcp/internal/mcptest"
	"github.com/b10x/connector-mcp/mcpclient"
)

// The operator's path: configure a server with bounds, connect (the era is negotiated once and
// cached), freeze the tool list, call a tool, close.
func Example() {
	srv := mcptest.StartHTTP(mcptest.NewServer("files", mcptest.DefaultTools()), mcptest.Modern)
	defer srv.Close()

	client := mcpclient.NewClient(nil)
	cfg := mcpclient.ServerConfig{
		HTTP:   &mcpclient.HTTPServer{URL: srv.URL}, // HTTPClient: the egress client in production
		Limits: mcpclient.Limits{MaxTools: 100, CallTimeout: 10 * time.Second},
	}
	ctx := context.Background()
	s, err := client.Connect(ctx, cfg)
	if err != nil {
		panic(err)
	}
	defer s.Close()

	snap, err := s.ListTools(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(s.Era(), len(snap.Tools), snap.Tools[0].Name)

	res, err := s.CallTool(ctx, "add", json.RawMessage(`{"a":2,"b":40}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(string(res))

	_, err = s.CallTool(ctx, "fail", nil)
	var te *mcpclient.ToolError
	fmt.Println(errors.As(err, &te), errors.Is(err, mcpclient.ErrToolError))
	// Output:
	// 2026-07-28 4 add
	// {"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"files","version":"1.0.0"}},"content":[{"type":"text","text":"42"}],"resultType":"complete"}
	// true true
}
