package snapshot

import (
	"encoding/json"
	"fmt"
	"testing"
)

func benchDescriptors(n int) []json.RawMessage {
	out := make([]json.RawMessage, n)
	for i := range out {
		out[i] = json.RawMessage(fmt.Sprintf(`{"name":"tool-%04d","title":"Tool %d","description":"Generated tool number %d, which reads things.","inputSchema":{"type":"object","properties":{"path":{"type":"string","description":"A path."},"limit":{"type":"integer","minimum":1,"maximum":1000}},"required":["path"]},"annotations":{"readOnlyHint":true,"openWorldHint":false}}`, i, i, i))
	}
	return out
}

// BenchmarkNew1000 freezes 1,000 realistic descriptors (validation, RFC 8785, sha256, warnings).
func BenchmarkNew1000(b *testing.B) {
	descs := benchDescriptors(1000)
	for b.Loop() {
		if _, err := New("2026-07-28", ServerInfo{Name: "bench"}, descs); err != nil {
			b.Fatal(err)
		}
	}
}
