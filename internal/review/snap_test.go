package review

import (
	"encoding/json"
	"testing"

	"github.com/b10x/connector-mcp/snapshot"
)

// snap builds a snapshot of descs (the diff tests that defined it moved to package drift).
func snap(t testing.TB, proto string, descs ...string) *snapshot.ToolSnapshot {
	t.Helper()
	raws := make([]json.RawMessage, len(descs))
	for i, d := range descs {
		raws[i] = json.RawMessage(d)
	}
	s, err := snapshot.New(proto, snapshot.ServerInfo{Name: "acme"}, raws)
	if err != nil {
		t.Fatalf("snapshot.New: %v", err)
	}
	return s
}

// base is a reviewed descriptor (the same as package drift's tests).
const base = `{"name":"read_file","description":"Read a file","inputSchema":{"type":"object","properties":{"path":{"type":"string","maxLength":256,"pattern":"^/"},"mode":{"type":"string","enum":["text","binary"]},"n":{"type":"integer","minimum":1,"maximum":10}},"required":["path"],"additionalProperties":false},"annotations":{"title":"Read","readOnlyHint":true}}`
