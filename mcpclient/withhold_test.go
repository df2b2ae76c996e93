package mcpclient

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/b10x/connector-mcp/internal/mcptest"
	"github.com/b10x/connector-mcp/refusal"
)

// withholdTools are descriptors with and without x-mcp-header annotations: valid and invalid
// ones, the key spelled plainly and with \u escapes, and a case variant of the key (an unknown
// member to the SDK, which reads member names exactly: no annotation).
var withholdTools = []string{
	`{"name":"plain","description":"no annotation","inputSchema":{"type":"object","properties":{"region":{"type":"string"}}}}`,
	`{"name":"route","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}}`,
	`{"name":"escaped","inputSchema":{"type":"object","properties":{"zone":{"type":"string","\u0078-mcp-header":"Zone"}}}}`,
	`{"name":"bad","inputSchema":{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"Dup"},"b":{"type":"string","x-mcp-header":"dup"}}}}`,
	`{"name":"bad-escaped","inputSchema":{"type":"object","properties":{"o":{"type":"object","x-mcp-\u0068eader":"Obj"}}}}`,
	`{"name":"variant","inputSchema":{"type":"object","properties":{"v":{"type":"object","X-MCP-Header":"V"}}}}`,
}

// withholdCalls are the callable tools, their arguments and the Mcp-Param-* headers the SDK sets
// for them at 2026-07-28 (none at 2025-11-25).
var withholdCalls = []struct {
	tool, args string
	headers    map[string]string
}{
	{"plain", `{"region":"eu"}`, nil},
	{"route", `{"region":"eu"}`, map[string]string{"Mcp-Param-Region": "eu"}},
	{"escaped", `{"zone":"z1"}`, map[string]string{"Mcp-Param-Zone": "z1"}},
	{"variant", `{"v":"x"}`, nil},
}

func withholdRaw() []json.RawMessage {
	out := make([]json.RawMessage, len(withholdTools))
	for i, d := range withholdTools {
		out[i] = json.RawMessage(d)
	}
	return out
}

// checkExcluded asserts that exactly the tools with invalid annotations are flagged and refused,
// and that every tool stays in the snapshot.
func checkExcluded(t *testing.T, s *Session) {
	t.Helper()
	snap, err := s.ListTools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Tools) != len(withholdTools) {
		t.Fatalf("%d tools in the snapshot, want %d", len(snap.Tools), len(withholdTools))
	}
	var flagged []string
	for _, w := range snap.Warnings {
		if w.Code == WarnInvalidToolHeaders {
			flagged = append(flagged, w.Tool)
		}
	}
	slices.Sort(flagged)
	if want := []string{"bad", "bad-escaped"}; !slices.Equal(flagged, want) {
		t.Fatalf("flagged %v, want %v", flagged, want)
	}
	for _, name := range []string{"bad", "bad-escaped"} {
		if _, err := s.CallTool(context.Background(), name, nil); refusal.Name(err) != RefusalInvalidToolHeaders {
			t.Fatalf("calling %s: %v, want %s", name, err, RefusalInvalidToolHeaders)
		}
	}
}

// TestWithheldToolsHTTP lists tools with valid and invalid x-mcp-header annotations (plain and
// \u-escaped key) over Streamable HTTP, JSON and SSE answers, one page and pages of two, in both
// eras: exactly the invalid ones are excluded, and the valid ones are called with the headers the
// SDK sets, on the direct and on the SDK call path (the SDK was handed only the annotated tools).
func TestWithheldToolsHTTP(t *testing.T) {
	for _, era := range []mcptest.Era{mcptest.Modern, mcptest.Legacy} {
		for _, sse := range []bool{false, true} {
			for _, page := range []int{0, 2} {
				for _, direct := range []bool{true, false} {
					name := string(era)
					if sse {
						name += "-sse"
					}
					if page > 0 {
						name += "-paged"
					}
					if direct {
						name += "-direct"
					} else {
						name += "-sdk"
					}
					t.Run(name, func(t *testing.T) {
						ws := &wireServer{raw: &mcptest.Raw{Era: era, Tools: withholdRaw(), SSE: sse, PageSize: page}}
						s := connect(t, ServerConfig{HTTP: &HTTPServer{URL: ws.start(t)}})
						checkExcluded(t, s)
						if !direct {
							sdkPath(s)
						}
						for _, c := range withholdCalls {
							if _, err := s.CallTool(context.Background(), c.tool, json.RawMessage(c.args)); err != nil {
								t.Fatalf("calling %s: %v", c.tool, err)
							}
							calls := ws.requests("tools/call")
							got := calls[len(calls)-1]
							if directIDRe.MatchString(got.id) != direct {
								t.Fatalf("calling %s: request id %s, direct path %v", c.tool, got.id, direct)
							}
							params := map[string]string{}
							for k, v := range got.header {
								if strings.HasPrefix(k, "Mcp-Param-") {
									params[k] = strings.Join(v, ",")
								}
							}
							want := c.headers
							if era == mcptest.Legacy {
								want = nil
							}
							if len(params) != len(want) {
								t.Fatalf("calling %s: headers %v, want %v", c.tool, params, want)
							}
							for k, v := range want {
								if params[k] != v {
									t.Fatalf("calling %s: %s = %q, want %q", c.tool, k, params[k], v)
								}
							}
						}
					})
				}
			}
		}
	}
}

// TestWithheldToolsStdio is TestWithheldToolsHTTP's listing over stdio (no headers there), in
// both eras: exactly the invalid tools are excluded and the others are callable.
func TestWithheldToolsStdio(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tools.json")
	if err := os.WriteFile(path, []byte("["+strings.Join(withholdTools, ",")+"]"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, era := range []mcptest.Era{mcptest.Modern, mcptest.Legacy} {
		t.Run(string(era), func(t *testing.T) {
			s := connect(t, ServerConfig{Stdio: &StdioServer{Argv: mcptest.StdioArgv("--raw", "--tools", path, "--page-size", "2", "--era", string(era))}})
			checkExcluded(t, s)
			for _, c := range withholdCalls {
				if _, err := s.CallTool(context.Background(), c.tool, json.RawMessage(c.args)); err != nil {
					t.Fatalf("calling %s: %v", c.tool, err)
				}
			}
		})
	}
}

// TestSDKListResult pins what the SDK is handed for a recorded tools/list result: every member as
// received, the tools array holding only the descriptors that may carry an x-mcp-header
// annotation (or are not objects), in their order.
func TestSDKListResult(t *testing.T) {
	page := `{"tools": [ ` + strings.Join(withholdTools, " , ") + `,null,{"name":"path","description":"C:\\users"}], "nextCursor":"c2","ttlMs":5,"x":{"y":[1]}}`
	got := sdkListResult([]byte(page))
	want := `{"tools": [` + strings.Join(withholdTools[1:5], ",") + `,null,{"name":"path","description":"C:\\users"}], "nextCursor":"c2","ttlMs":5,"x":{"y":[1]}}`
	if string(got) != want {
		t.Fatalf("SDK handed\n%s\nwant\n%s", got, want)
	}
	if string(sdkResult(opListTools, []byte(page))) != want {
		t.Fatal("sdkResult does not withhold for tools/list")
	}
}

// Must-fail twins: the SDK gets the result as received when nothing is withheld, when the page
// is one the strict split does not rewrite (an escaped member name), and for another operation.
func TestSDKListResultAsReceived(t *testing.T) {
	cases := []struct {
		name, op, result string
	}{
		{"all annotated", opListTools, `{"tools":[` + withholdTools[1] + `]}`},
		{"empty", opListTools, `{"tools":[]}`},
		{"escaped member name", opListTools, `{"tool\u0073":[` + withholdTools[0] + `]}`},
		{"not a page", opListTools, `[` + withholdTools[0] + `]`},
		{"other operation", "prompts/list", `{"tools":[` + withholdTools[0] + `]}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := sdkResult(c.op, []byte(c.result)); got != nil {
				t.Fatalf("SDK handed %s, want the result as received (nil)", got)
			}
		})
	}
}

// Must-fail twin of the exclusion rule: a tool the SDK was handed and dropped is flagged; one it
// was not handed (no annotation) is never flagged, though absent from the SDK's typed result.
func TestSDKNeedsTool(t *testing.T) {
	for _, d := range withholdTools {
		var m struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal([]byte(d), &m); err != nil {
			t.Fatal(err)
		}
		want := m.Name != "plain" && m.Name != "variant"
		if got := sdkNeedsTool([]byte(d)); got != want {
			t.Fatalf("sdkNeedsTool(%s) = %v, want %v", m.Name, got, want)
		}
	}
	for _, d := range []string{`null`, `5`, `"x"`, ``} {
		if !sdkNeedsTool([]byte(d)) {
			t.Fatalf("sdkNeedsTool(%q) = false: the SDK's verdict on a non-object is lost", d)
		}
	}
}

// FuzzSDKListResult: nothing is withheld from a page the strict split does not read; what the SDK
// is handed for a JSON page is JSON, read by the same strict split
// as the same page with exactly the descriptors sdkNeedsTool keeps, in order, and the same
// cursor; when nothing is withheld it is the page as received. It never panics.
func FuzzSDKListResult(f *testing.F) {
	f.Add([]byte(`{"tools": [ ` + strings.Join(withholdTools, " , ") + `,null], "nextCursor":"c2","ttlMs":5}`))
	f.Add([]byte(`{"tools":[{"name":"a"},{"name":"b","d":"x-mcp-header"}],"nextCursor":null}`))
	f.Add([]byte(`{"tools":[{"name":"a","d":"}]\"{["}, [[]], "x\\u"]}`))
	f.Add([]byte(`{"tools":[]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		out := sdkListResult(raw)
		tools, next, ok := splitPage(raw)
		if !ok && out != nil {
			t.Fatalf("handed %q for a page the split does not read: %q", out, raw)
		}
		if !ok || !json.Valid(raw) {
			// The transports refuse a frame that is not JSON before a page is read.
			return
		}
		var want []json.RawMessage
		for _, d := range tools {
			if sdkNeedsTool(d) {
				want = append(want, d)
			}
		}
		if out == nil {
			if len(want) != len(tools) {
				t.Fatalf("nothing withheld from %q", raw)
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("handed invalid JSON %q for %q", out, raw)
		}
		got, gotNext, ok := splitPage(out)
		if !ok || len(got) != len(want) || (next == nil) != (gotNext == nil) || (next != nil && *next != *gotNext) {
			t.Fatalf("handed %q for %q", out, raw)
		}
		for i := range got {
			if string(got[i]) != string(want[i]) {
				t.Fatalf("descriptor %d: %q, want %q", i, got[i], want[i])
			}
		}
	})
}

// A withheld descriptor is not decoded by the SDK: one whose "title" is not a string is frozen as
// received and callable. Must-fail twin: handed to the SDK (it may carry an x-mcp-header
// annotation), the same descriptor fails the SDK's typed decode of the page, so the SDK judged
// none of the page's annotated tools: they stay in the snapshot, flagged and refused, the valid
// "route" too, while the page's withheld tools stay callable.
func TestWithheldToolNotTypedBySDK(t *testing.T) {
	const plain = `{"name":"t","title":5,"inputSchema":{"type":"object"}}`
	const handed = `{"name":"h","title":5,"inputSchema":{"type":"object","properties":{"r":{"type":"string","x-mcp-header":"R"}}}}`
	for _, era := range []mcptest.Era{mcptest.Modern, mcptest.Legacy} {
		t.Run(string(era), func(t *testing.T) {
			srv := mcptest.StartRawHTTP(&mcptest.Raw{Era: era, Tools: []json.RawMessage{json.RawMessage(plain)}})
			t.Cleanup(srv.Close)
			s := connect(t, ServerConfig{HTTP: &HTTPServer{URL: srv.URL}})
			snap, err := s.ListTools(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(snap.Tools) != 1 || string(snap.Tools[0].Descriptor) != plain || len(snap.Warnings) != 0 {
				t.Fatalf("snapshot %+v, warnings %+v", snap.Tools, snap.Warnings)
			}
			if _, err := s.CallTool(context.Background(), "t", nil); err != nil {
				t.Fatalf("calling the withheld tool: %v", err)
			}

			tools := []json.RawMessage{json.RawMessage(plain), json.RawMessage(handed), json.RawMessage(withholdTools[1])}
			twin := mcptest.StartRawHTTP(&mcptest.Raw{Era: era, Tools: tools})
			t.Cleanup(twin.Close)
			s = connect(t, ServerConfig{HTTP: &HTTPServer{URL: twin.URL}})
			snap, err = s.ListTools(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var flagged []string
			for _, w := range snap.Warnings {
				if w.Code == WarnInvalidToolHeaders {
					flagged = append(flagged, w.Tool)
				}
			}
			if len(snap.Tools) != 3 || !slices.Equal(flagged, []string{"h", "route"}) {
				t.Fatalf("%d tools, flagged %v, want 3 and [h route]", len(snap.Tools), flagged)
			}
			for _, name := range flagged {
				if _, err := s.CallTool(context.Background(), name, nil); refusal.Name(err) != RefusalInvalidToolHeaders {
					t.Fatalf("calling %s: %v, want %s", name, err, RefusalInvalidToolHeaders)
				}
			}
			if _, err := s.CallTool(context.Background(), "t", nil); err != nil {
				t.Fatalf("calling the withheld tool: %v", err)
			}
		})
	}
}
