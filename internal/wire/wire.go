// Package wire holds the pieces of the Streamable HTTP wire that the MCP client (mcpclient) and
// the gateway both speak beside go-sdk on their direct tools/call paths: the protocol revisions
// they answer directly, the JSON-RPC envelope as go-sdk's jsonrpc2 writes it (Request, Response,
// Marshal) and the common tools/call request (ParseCall, PlainID), the content negotiation of a
// POST, the response bodies bounded to a frame limit below go-sdk (JSONBody, SSEBody, ErrorBody,
// reporting each frame to a Frames), and the server-sent event reader (EventReader).
//
// It holds no session state: what a frame means to a request (the capture of raw results, the
// refusals of a session) belongs to its caller, through Frames.
//
// JSON read from the wire is parsed by the snapshot package's strict scanner (unique member
// names at every depth, valid UTF-8, exact-case names), which stays stricter than encoding/json
// on purpose: a message is never read differently by the direct path and by the code that
// checks it.
package wire

import (
	"bytes"
	"encoding/json"
	"mime"
	"strings"
)

// The protocol revisions whose tools/call the direct paths handle.
const (
	// ProtocolModern is revision 2026-07-28: stateless, negotiated by server/discover, with
	// per-request _meta.
	ProtocolModern = "2026-07-28"
	// ProtocolLegacy is revision 2025-11-25: negotiated by initialize.
	ProtocolLegacy = "2025-11-25"
)

// AcceptJSONAndStream is the Accept header a Streamable HTTP client sends on a POST.
const AcceptJSONAndStream = "application/json, text/event-stream"

// Marshal encodes v as go-sdk's jsonrpc2 does: raw values compacted, nothing HTML-escaped, no
// trailing newline.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
}

// MediaType returns the media type of a response's Content-Type value as the go-sdk client reads
// it: lower-cased, without its parameters, and kept when only a parameter is malformed; "" when
// the value does not parse at all.
func MediaType(v string) string {
	mt, _, _ := mime.ParseMediaType(v)
	return mt
}

// IsJSON reports whether a request's Content-Type is application/json, parameters allowed and
// well-formed (as the go-sdk server judges it).
func IsJSON(v string) bool {
	mt, _, err := mime.ParseMediaType(v)
	return err == nil && mt == "application/json"
}

// AcceptsJSONAndStream reports whether the Accept values admit both application/json and
// text/event-stream, as the Streamable HTTP transport requires of a POST.
func AcceptsJSONAndStream(values []string) bool {
	var jsonOK, streamOK bool
	for _, value := range values {
		for _, raw := range strings.Split(value, ",") {
			base, _, _ := strings.Cut(strings.TrimSpace(raw), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK && streamOK
}
