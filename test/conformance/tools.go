package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
)

func init() {
	register("initialize", listOnly)
	register("request-metadata", listOnly)
	register("json-schema-ref-no-deref", listOnly)
	register("tools_call", toolsCall)
	register("sse-retry", callNamed("test_reconnection", `{}`))
	register("elicitation-sep1034-client-defaults", callNamed("test_client_elicitation_defaults", `{}`))
	register("json-schema-2020-12-preservation", schemaPreservation)
	register("sep-2322-client-request-state", multiRound)
	register("http-standard-headers", callFirstTool)
	register("http-custom-headers", callFromContext)
	register("http-invalid-tool-headers", callEveryCallable)
}

// listOnly connects and freezes the tool list.
func listOnly(ctx context.Context, url string, _ map[string]any) error {
	s, err := connect(ctx, url)
	if err != nil {
		return err
	}
	defer s.Close()
	_, err = s.ListTools(ctx)
	return err
}

func toolsCall(ctx context.Context, url string, conf map[string]any) error {
	return callNamed("add_numbers", `{"a":5,"b":3}`)(ctx, url, conf)
}

// callNamed lists tools, requires tool name, and calls it with args.
func callNamed(name, args string) scenario {
	return func(ctx context.Context, url string, _ map[string]any) error {
		s, err := connect(ctx, url)
		if err != nil {
			return err
		}
		defer s.Close()
		snap, err := s.ListTools(ctx)
		if err != nil {
			return err
		}
		if _, ok := snap.Lookup(name); !ok {
			return fmt.Errorf("tool %q not listed", name)
		}
		_, err = s.CallTool(ctx, name, json.RawMessage(args))
		return err
	}
}

// schemaPreservation echoes the focal tool's inputSchema, exactly as received, to the referee.
func schemaPreservation(ctx context.Context, url string, _ map[string]any) error {
	s, err := connect(ctx, url)
	if err != nil {
		return err
	}
	defer s.Close()
	snap, err := s.ListTools(ctx)
	if err != nil {
		return err
	}
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
	_, err = s.CallTool(ctx, "json_schema_echo", json.RawMessage(`{"schema":`+string(d.InputSchema)+`}`))
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

func callFirstTool(ctx context.Context, url string, _ map[string]any) error {
	s, err := connect(ctx, url)
	if err != nil {
		return err
	}
	defer s.Close()
	snap, err := s.ListTools(ctx)
	if err != nil {
		return err
	}
	if len(snap.Tools) > 0 {
		if _, err := s.CallTool(ctx, snap.Tools[0].Name, nil); err != nil {
			log.Printf("call of the first listed tool: %v", err)
		}
	}
	return nil
}

// callFromContext makes the tool calls the runner supplies in toolCalls.
func callFromContext(ctx context.Context, url string, conf map[string]any) error {
	s, err := connect(ctx, url)
	if err != nil {
		return err
	}
	defer s.Close()
	if _, err := s.ListTools(ctx); err != nil {
		return err
	}
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
func callEveryCallable(ctx context.Context, url string, _ map[string]any) error {
	s, err := connect(ctx, url)
	if err != nil {
		return err
	}
	defer s.Close()
	snap, err := s.ListTools(ctx)
	if err != nil {
		return err
	}
	for _, t := range snap.Tools {
		if _, err := s.CallTool(ctx, t.Name, json.RawMessage(`{"region":"us-west1"}`)); err != nil {
			log.Printf("call %s: %v", t.Name, err)
		}
	}
	return nil
}
