package wire

import (
	"encoding/json"
	"testing"
)

// TestPlainID pins which JSON-RPC ids the direct path echoes byte for byte.
func TestPlainID(t *testing.T) {
	for id, want := range map[string]bool{
		`1`: true, `-7`: true, `"req-1"`: true, `123456789012345`: true,
		`1.0`: false, `1e3`: false, `01`: false, `1234567890123456`: false, `"a\"b"`: false, `"<x>"`: false,
		`null`: false, `{}`: false, `""`: true, `-`: false, `"é"`: false,
	} {
		if got := PlainID(json.RawMessage(id)); got != want {
			t.Errorf("PlainID(%s) = %v, want %v", id, got, want)
		}
	}
}

// ParseCall reads the common tools/call request; its twins (another method, a batch, a fifth
// member, an unknown params member, an empty name, arguments that are not an object, a repeated
// member) are not read.
func TestParseCall(t *testing.T) {
	c, ok := ParseCall([]byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"a":1},"_meta":{"k":1}}}`))
	if !ok || string(c.ID) != "7" || c.Name != "echo" || string(c.Arguments) != `{"a":1}` || string(c.Meta) != `{"k":1}` {
		t.Fatalf("got %+v, %v", c, ok)
	}
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"name":"echo"}}`,
		`[{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo"}}]`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo"},"x":1}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","task":{}}}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":""}}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":[]}}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","name":"x"}}`,
		`{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"echo"}}`,
	} {
		if _, ok := ParseCall([]byte(body)); ok {
			t.Errorf("%s: read", body)
		}
	}
}
