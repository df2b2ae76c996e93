package wire

import (
	"encoding/json"

	"github.com/b10x/connector-mcp/snapshot"
)

// Request is a JSON-RPC request as go-sdk's jsonrpc2 encodes it (see Marshal).
type Request struct {
	// Version is always "2.0".
	Version string `json:"jsonrpc"`
	// ID is the request id; nil for a notification.
	ID any `json:"id,omitempty"`
	// Method is the method name, e.g. "tools/call".
	Method string `json:"method"`
	// Params is the parameters object as encoded.
	Params json.RawMessage `json:"params,omitempty"`
}

// Response is a JSON-RPC response as go-sdk's jsonrpc2 encodes it.
type Response struct {
	// Version is always "2.0".
	Version string `json:"jsonrpc"`
	// ID is the id of the request answered, as received.
	ID json.RawMessage `json:"id"`
	// Result is the result of a successful request.
	Result json.RawMessage `json:"result,omitempty"`
	// Error is the error of a failed request.
	Error *Error `json:"error,omitempty"`
}

// Error is a JSON-RPC error object without data.
type Error struct {
	// Code is the JSON-RPC error code.
	Code int64 `json:"code"`
	// Message is the error message.
	Message string `json:"message"`
}

// Call is a tools/call request of the common shape (see ParseCall): its id as received, the tool
// name, the arguments object as received, and the _meta object as received (nil when absent).
type Call struct {
	// ID is the request id, byte for byte (PlainID holds).
	ID json.RawMessage
	// Name is the tool name (not empty).
	Name string
	// Arguments is the arguments object as received; nil when absent.
	Arguments json.RawMessage
	// Meta is the params' _meta value as received; nil when absent.
	Meta json.RawMessage
}

// ParseCall reads body as one tools/call request of exactly the common shape: one JSON-RPC
// request object (no batch) of the members jsonrpc ("2.0"), method ("tools/call"), id (PlainID)
// and params, the params of only name (a non-empty string), arguments (an object) and _meta.
// Parsing is strict (snapshot.Members: unique member names at every depth, valid UTF-8,
// exact-case names); ok is false for anything else.
func ParseCall(body []byte) (call Call, ok bool) {
	top, err := snapshot.Members(body)
	if err != nil || len(top) != 4 {
		return Call{}, false
	}
	var params json.RawMessage
	for _, m := range top {
		switch m.Name {
		case "jsonrpc":
			if string(m.Value) != `"2.0"` {
				return Call{}, false
			}
		case "method":
			if string(m.Value) != `"tools/call"` {
				return Call{}, false
			}
		case "id":
			if !PlainID(m.Value) {
				return Call{}, false
			}
			call.ID = m.Value
		case "params":
			params = m.Value
		default:
			return Call{}, false
		}
	}
	if call.ID == nil || params == nil {
		return Call{}, false
	}
	ps, err := snapshot.Members(params)
	if err != nil {
		return Call{}, false
	}
	for _, m := range ps {
		switch m.Name {
		case "name":
			if m.Value[0] != '"' || json.Unmarshal(m.Value, &call.Name) != nil || call.Name == "" {
				return Call{}, false
			}
		case "arguments":
			if m.Value[0] != '{' {
				return Call{}, false
			}
			call.Arguments = m.Value
		case "_meta":
			call.Meta = m.Value
		default:
			return Call{}, false
		}
	}
	if call.Name == "" {
		return Call{}, false
	}
	return call, true
}

// PlainID reports whether v is a JSON-RPC id that can be echoed byte for byte into an answer
// written as go-sdk writes it: an integer of at most 15 digits, or a string of printable ASCII
// without escapes or HTML-significant characters.
func PlainID(v json.RawMessage) bool {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		for _, c := range v[1 : len(v)-1] {
			if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
				return false
			}
		}
		return true
	}
	d := v
	if len(d) > 0 && d[0] == '-' {
		d = d[1:]
	}
	if len(d) == 0 || len(d) > 15 || (d[0] == '0' && len(d) > 1) {
		return false
	}
	for _, c := range d {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
