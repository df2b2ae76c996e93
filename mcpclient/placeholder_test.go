package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/b10x/connector-mcp/internal/mcptest"
	"github.com/b10x/connector-mcp/internal/wire"
	"github.com/b10x/connector-mcp/snapshot"
)

// A recorded tools/call result reaches the SDK as a placeholder: every other member as received.
func TestPlaceholderFrameForRecordedCallResult(t *testing.T) {
	r := &registry{}
	st := &callState{op: opCallTool, cancel: func(error) {}}
	r.bind("7", st)
	frame := []byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"x-unknown","v":1}],"isError":false},"x\"y":1}`)
	rep, err := r.deliverFrame(st, frame)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"jsonrpc":"2.0","id":7,"result":{},"x\"y":1}`; string(rep) != want {
		t.Fatalf("placeholder frame = %s, want %s", rep, want)
	}
	if want := `{"content":[{"type":"x-unknown","v":1}],"isError":false}`; string(st.result) != want {
		t.Fatalf("recorded result = %s, want %s", st.result, want)
	}
}

// Must-fail twins: the SDK gets the frame as received for another operation, an error
// response, a second response to the same request, and a response to no request of ours.
func TestPlaceholderFrameOnlyForRecordedCallResult(t *testing.T) {
	cases := []struct {
		name  string
		op    string
		frame string
		twice bool
	}{
		{"tools/list result", "tools/list", `{"jsonrpc":"2.0","id":7,"result":{"tools":[]}}`, false},
		{"error response", opCallTool, `{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"m"}}`, false},
		{"second response", opCallTool, `{"jsonrpc":"2.0","id":7,"result":{"content":[]}}`, true},
		{"unknown id", opCallTool, `{"jsonrpc":"2.0","id":8,"result":{"content":[]}}`, false},
		{"request", opCallTool, `{"jsonrpc":"2.0","id":7,"method":"roots/list"}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &registry{}
			st := &callState{op: c.op, cancel: func(error) {}}
			r.bind("7", st)
			if c.twice {
				if rep, _ := r.deliverFrame(st, []byte(c.frame)); rep == nil {
					t.Fatal("first response: no placeholder")
				}
			}
			rep, err := r.deliverFrame(st, []byte(c.frame))
			if err != nil || rep != nil {
				t.Fatalf("deliverFrame = %s, %v; want the frame as received (nil, nil)", rep, err)
			}
		})
	}
}

// sseRead runs stream through a wire.SSEBody bound to a tools/call request with id 1 and returns
// what the SDK reads.
func sseRead(t *testing.T, stream string) (string, *callState) {
	t.Helper()
	r := &registry{}
	st := &callState{op: opCallTool, cancel: func(error) {}}
	r.bind("1", st)
	b := wire.NewSSEBody(io.NopCloser(iotest.OneByteReader(strings.NewReader(stream))), 1<<20, &capture{reg: r, st: st})
	out, err := io.ReadAll(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(out), st
}

func TestSSEPlaceholderEvent(t *testing.T) {
	result := `{"content":[{"type":"text","text":"a\"b"}],"structuredContent":{"k":[1,2]}}`
	stream := ": hello\n\nevent: message\r\nid: 42\ndata: {\"jsonrpc\":\"2.0\",\ndata: \"id\":1,\"result\":" + result + "}\n\n"
	got, st := sseRead(t, stream)
	want := ": hello\n\nevent: message\r\nid: 42\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"
	if got != want {
		t.Fatalf("SDK read\n%q\nwant\n%q", got, want)
	}
	if string(st.result) != result {
		t.Fatalf("recorded result = %s, want %s", st.result, result)
	}
}

// Must-fail twin: an event with a line the SDK refuses (no colon) reaches it as received, and so
// does the unfinished event at the end of the stream.
func TestSSEEventPassedThroughWhenNotPlain(t *testing.T) {
	stream := "bogus\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[]}}\n\ndata: {\"jsonrpc\""
	got, st := sseRead(t, stream)
	if got != stream {
		t.Fatalf("SDK read %q, want the stream as received", got)
	}
	if string(st.result) != `{"content":[]}` {
		t.Fatalf("recorded result = %s", st.result)
	}
}

// End to end over both eras, HTTP and stdio: the result is the upstream's bytes (an unknown content type the
// SDK cannot decode included), while the SDK decoded only the placeholder.
func TestCallToolResultAsSentWithPlaceholder(t *testing.T) {
	for _, tc := range []struct {
		name  string
		era   mcptest.Era
		stdio bool
	}{{"http-modern", mcptest.Modern, false}, {"http-legacy", mcptest.Legacy, false}, {"stdio-modern", mcptest.Modern, true}, {"stdio-legacy", mcptest.Legacy, true}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(tc.era)
			if !tc.stdio {
				srv := mcptest.StartHTTP(mcptest.NewServer("p", mcptest.DefaultTools()), tc.era)
				defer srv.Close()
				cfg = ServerConfig{HTTP: &HTTPServer{URL: srv.URL}}
			}
			s, err := NewClient(nil).Connect(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if (tc.era == mcptest.Legacy) != (s.Era() == EraLegacy) {
				t.Fatalf("negotiated %s for a %s server", s.Era(), tc.era)
			}
			text := strings.Repeat(`q"\`, 5000)
			args, _ := json.Marshal(map[string]string{"text": text})
			raw, err := s.CallTool(context.Background(), "echo", args)
			if err != nil {
				t.Fatal(err)
			}
			var res struct {
				Content []struct{ Text string } `json:"content"`
			}
			if err := json.Unmarshal(raw, &res); err != nil || len(res.Content) != 1 || res.Content[0].Text != string(args) {
				t.Fatalf("result does not carry the echoed text: %v", err)
			}
			_, err = s.CallTool(context.Background(), "fail", nil)
			var te *ToolError
			if !errors.As(err, &te) || !bytes.Contains(te.Result, []byte(`"isError":true`)) {
				t.Fatalf("fail: %v, want a *ToolError carrying the result", err)
			}
		})
	}
}

// The strict split reads what the full exact-case decode reads, and refuses anything else.
func TestParseCallResultMatchesFullDecode(t *testing.T) {
	docs := []string{
		`{}`, ` { "isError" : true , "content" : [ {"a":"}\"]"} ] } `,
		`{"content":[],"resultType":"input_required","isError":null}`,
		`{"IsError":true,"ResultType":"task"}`,
		`{"resultType":"complete","structuredContent":{"isError":true}}`,
	}
	for _, d := range docs {
		var full callResult
		if err := snapshot.Unmarshal([]byte(d), &full); err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		got, ok := parseCallResult([]byte(d))
		if !ok || got != full {
			t.Fatalf("%s: strict split read %+v (ok %v), full decode %+v", d, got, ok, full)
		}
	}
	// Must-fail twins: parseCallResult refuses what the full decode refuses.
	for _, d := range []string{`{"isError":"yes"}`, `{"resultType":1}`, `[]`, `{"isError":true}x`, `{"isError":true,"isError":false}`} {
		if _, ok := parseCallResult([]byte(d)); ok {
			t.Fatalf("%s: accepted", d)
		}
	}
	// An escaped member name is the member, as the full decode reads it.
	if got, ok := parseCallResult([]byte(`{"is\u0045rror":true}`)); !ok || !got.IsError {
		t.Fatalf(`{"is\u0045rror":true}: read %+v (ok %v), want isError true`, got, ok)
	}
	if _, ok := parseCallResult([]byte(`{"isError":"yes"}`)); ok {
		t.Fatal(`{"isError":"yes"} accepted`)
	}
}

// testConfig is a stdio server of era with the default tools.
func testConfig(era mcptest.Era) ServerConfig {
	return ServerConfig{Stdio: &StdioServer{Argv: mcptest.StdioArgv("--era", string(era))}}
}
