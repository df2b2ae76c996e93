package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/b10x/connector-mcp/internal/mcptest"
	"github.com/b10x/connector-mcp/refusal"
)

// A tools/call result whose resultType is not "complete" is not a result: it is refused by the
// name of what it stands for — "tasks" for a created task (resultType "task", the 2026-07-28
// task-augmented execution this client refuses), "input_required" for a multi-round request,
// "multi_round" for any other kind — on every path a result takes: stdio, the direct HTTP path,
// the SDK's HTTP path (a session that watches list changes), both eras. Nothing of the result
// (its text, the task id) reaches the error. The twin: the same server without the misbehaviour
// answers a complete result.
func TestNonCompleteResultTypesRefusedByName(t *testing.T) {
	kinds := []struct{ hostile, want string }{
		{mcptest.HostileTaskResult, RefusalTasks},
		{mcptest.HostileInputRequired, RefusalInputRequired},
		{mcptest.HostileOtherResultType, RefusalMultiRound},
		{mcptest.HostileNone, ""},
	}
	paths := []struct {
		name string
		cfg  func(t *testing.T, hostile string) ServerConfig
	}{
		{"stdio modern", func(_ *testing.T, h string) ServerConfig { return stdio("--hostile", h) }},
		{"stdio legacy", func(_ *testing.T, h string) ServerConfig { return stdio("--hostile", h, "--era", "legacy") }},
		{"http direct", func(t *testing.T, h string) ServerConfig {
			srv := mcptest.StartRawHTTP(&mcptest.Raw{Era: mcptest.Modern, Hostile: h})
			t.Cleanup(srv.Close)
			return ServerConfig{HTTP: &HTTPServer{URL: srv.URL}}
		}},
		{"http sdk path", func(t *testing.T, h string) ServerConfig {
			srv := mcptest.StartRawHTTP(&mcptest.Raw{Era: mcptest.Modern, Hostile: h, SSE: true})
			t.Cleanup(srv.Close)
			return ServerConfig{HTTP: &HTTPServer{URL: srv.URL}, WatchToolListChanged: true}
		}},
		{"http legacy", func(t *testing.T, h string) ServerConfig {
			srv := mcptest.StartRawHTTP(&mcptest.Raw{Era: mcptest.Legacy, Hostile: h})
			t.Cleanup(srv.Close)
			return ServerConfig{HTTP: &HTTPServer{URL: srv.URL}}
		}},
	}
	for _, p := range paths {
		for _, k := range kinds {
			name := k.want
			if name == "" {
				name = "complete"
			}
			t.Run(p.name+"/"+name, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				s, err := NewClient(nil).Connect(ctx, p.cfg(t, k.hostile))
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				res, err := s.CallTool(ctx, "echo", json.RawMessage(`{"text":"hi"}`))
				if k.want == "" {
					if err != nil {
						t.Fatalf("complete result refused: %v", err)
					}
					return
				}
				var fr *FeatureRefusedError
				if !errors.As(err, &fr) || fr.Feature != k.want || refusal.Name(err) != k.want || !errors.Is(err, ErrFeatureRefused) {
					t.Fatalf("got %v (%.100s), want the feature refusal %q", err, res, k.want)
				}
				for _, leak := range []string{"task-1", "started", "first half", "partial", "elicitation"} {
					if strings.Contains(err.Error(), leak) {
						t.Fatalf("the error repeats the result: %q", err)
					}
				}
			})
		}
	}
}
