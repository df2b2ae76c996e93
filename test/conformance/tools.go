package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/b10x/connector-mcp/mcpclient"
	"github.com/b10x/connector-mcp/snapshot"
)

func init() {
	register("initialize", listOnly)
	register("request-metadata", listOnly)
	register("json-schema-ref-no-deref", listOnly)
	register("tools_call", callNamed("add_numbers", `{"a":5,"b":3}`))
	register("sse-retry", callNamed("test_reconnection", `{}`))
	register("elicitation-sep1034-client-defaults", callNamed("test_client_elicitation_defaults", `{}`))
	register("json-schema-2020-12-preservation", listed(schemaPreservation))
	register("sep-2322-client-request-state", multiRound)
	register("http-standard-headers", listed(callFirstTool))
	register("http-custom-headers", listed(callFromContext))
	register("http-invalid-tool-headers", listed(callEveryCallable))
}

// listedScenario runs against a connected session whose tool list has been frozen.
type listedScenario func(ctx context.Context, s *mcpclient.Session, snap *snapshot.ToolSnapshot, conf map[string]any) error

// listed connects, freezes the tool list, runs fn and closes the session.
func listed(fn listedScenario) scenario {
	return func(ctx context.Context, url string, conf map[string]any) error {
		s, err := connect(ctx, url)
		if err != nil {
			return err
		}
		defer s.Close()
		snap, err := s.ListTools(ctx)
		if err != nil {
			return err
		}
		return fn(ctx, s, snap, conf)
	}
}

// listOnly connects and freezes the tool list.
var listOnly = listed(func(context.Context, *mcpclient.Session, *snapshot.ToolSnapshot, map[string]any) error { return nil })

// callNamed lists tools, requires tool name, and calls it with args.
func callNamed(name, args string) scenario {
	return listed(func(ctx context.Context, s *mcpclient.Session, snap *snapshot.ToolSnapshot, _ map[string]any) error {
		if _, ok := snap.Lookup(name); !ok {
			return fmt.Errorf("tool %q not listed", name)
		}
		_, err := s.CallTool(ctx, name, json.RawMessage(args))
		return err
	})
}

// schemaPreservation echoes the focal tool's inputSchema, exactly as received, to the referee.
func schemaPreservation(ctx context.Context, s *mcpclient.Session, snap *snapshot.ToolSnapshot, _ map[string]any) error {
	t, ok := snap.Lookup("json_schema_2020_12_tool")
	if !ok {
		return fmt.Errorf("focal tool not listed")
	}
	var d struct {
		InputSchema json.RawMessage `json:"inputSchema"`
	}
	if err := json.Unmarshal(t.Descriptor, &d); err != nil {
		return err
	}
	_, err := s.CallTool(ctx, "json_schema_echo", json.RawMessage(`{"schema":`+string(d.InputSchema)+`}`))
	return err
}

// multiRound calls the SEP-2322 tools; multi-round results are refused by design.
func multiRound(ctx context.Context, url string, _ map[string]any) error {
	s, err := connect(ctx, url)
	if err != nil {
		return err
	}
	defer s.Close()
	var firstErr error
	for _, name := range []string{"test_mrtr_echo_state", "test_mrtr_no_state", "test_mrtr_unrelated", "test_mrtr_no_result_type"} {
		if _, err := s.CallTool(ctx, name, nil); err != nil {
			log.Printf("call %s: %v", name, err)
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	return firstErr
}

// callFirstTool calls the first listed tool (the referee checks the standard headers).
func callFirstTool(ctx context.Context, s *mcpclient.Session, snap *snapshot.ToolSnapshot, _ map[string]any) error {
	if len(snap.Tools) > 0 {
		if _, err := s.CallTool(ctx, snap.Tools[0].Name, nil); err != nil {
			log.Printf("call of the first listed tool: %v", err)
		}
	}
	return nil
}

// callFromContext makes the tool calls the runner supplies in toolCalls.
func callFromContext(ctx context.Context, s *mcpclient.Session, _ *snapshot.ToolSnapshot, conf map[string]any) error {
	calls, _ := conf["toolCalls"].([]any)
	for _, c := range calls {
		obj, _ := c.(map[string]any)
		name, _ := obj["name"].(string)
		args, _ := json.Marshal(obj["arguments"])
		if string(args) == "null" {
			args = []byte(`{}`)
		}
		if _, err := s.CallTool(ctx, name, args); err != nil {
			log.Printf("call %s: %v", name, err)
		}
	}
	return nil
}

// callEveryCallable calls each listed tool; tools with invalid header annotations are refused
// locally (invalid_tool_headers) and so never reach the server.
func callEveryCallable(ctx context.Context, s *mcpclient.Session, snap *snapshot.ToolSnapshot, _ map[string]any) error {
	for _, t := range snap.Tools {
		if _, err := s.CallTool(ctx, t.Name, json.RawMessage(`{"region":"us-west1"}`)); err != nil {
			log.Printf("call %s: %v", t.Name, err)
		}
	}
	return nil
}
