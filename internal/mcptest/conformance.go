package mcptest

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// JSONSchema202012 is the input schema the official conformance suite's json-schema-2020-12
// scenario expects verbatim.
const JSONSchema202012 = `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"address":{"$anchor":"addressDef","type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}}}},"properties":{"name":{"type":"string"},"address":{"$ref":"#/$defs/address"},"contactMethod":{"type":"string","enum":["phone","email"]},"phone":{"type":"string"},"email":{"type":"string"}},"allOf":[{"anyOf":[{"required":["phone"]},{"required":["email"]}]}],"if":{"properties":{"contactMethod":{"const":"phone"}},"required":["contactMethod"]},"then":{"required":["phone"]},"else":{"required":["email"]},"additionalProperties":false}`

// NewConformanceServer returns a go-sdk server with the tools the official MCP conformance
// suite's server scenarios call (text, image, audio, embedded resource, mixed content, an error
// result, the JSON Schema 2020-12 tool): the upstream behind the gateway's and mcpctl serve's
// conformance runs (hack/gateway-conformance.sh, hack/serve-conformance.sh).
func NewConformanceServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "conformance-upstream", Version: "1"}, nil)
	obj := json.RawMessage(`{"type":"object"}`)
	res := func(c ...mcp.Content) *mcp.CallToolResult { return &mcp.CallToolResult{Content: c} }
	add := func(name string, schema json.RawMessage, out func() *mcp.CallToolResult) {
		srv.AddTool(&mcp.Tool{Name: name, Description: "Conformance tool " + name + ".", InputSchema: schema},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return out(), nil })
	}
	resource := &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "test://resource", MIMEType: "text/plain", Text: "resource text"}}
	add("test_simple_text", obj, func() *mcp.CallToolResult {
		return res(&mcp.TextContent{Text: "This is a simple text response for testing."})
	})
	add("test_image_content", obj, func() *mcp.CallToolResult {
		return res(&mcp.ImageContent{Data: []byte("\x89PNG\r\n\x1a\n"), MIMEType: "image/png"})
	})
	add("test_audio_content", obj, func() *mcp.CallToolResult {
		return res(&mcp.AudioContent{Data: []byte("RIFF....WAVE"), MIMEType: "audio/wav"})
	})
	add("test_embedded_resource", obj, func() *mcp.CallToolResult { return res(resource) })
	add("test_multiple_content_types", obj, func() *mcp.CallToolResult {
		return res(&mcp.TextContent{Text: "Multiple content types test:"}, &mcp.ImageContent{Data: []byte("\x89PNG\r\n\x1a\n"), MIMEType: "image/png"}, resource)
	})
	add("test_error_handling", obj, func() *mcp.CallToolResult {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "This tool intentionally returns an error for testing"}}}
	})
	add("json_schema_2020_12_tool", json.RawMessage(JSONSchema202012), func() *mcp.CallToolResult { return res(&mcp.TextContent{Text: "ok"}) })
	return srv
}
