package drift

import (
	"encoding/json"
	"testing"

	"github.com/b10x/connector-mcp/snapshot"
)

// FuzzCompare asserts two properties over arbitrary descriptor pairs: the report of a snapshot
// against itself is empty, and every tool that differs carries at least one class (and, when
// changed, at least one field-level change whose classes are not empty).
func FuzzCompare(f *testing.F) {
	f.Add(base, `{"name":"read_file","inputSchema":{"type":"object"}}`)
	f.Add(`{"name":"a","description":"x"}`, `{"name":"a","description":"y\u200b"}`)
	f.Add(`{"name":"a","inputSchema":{"enum":[1,2]}}`, `{"name":"a","inputSchema":{"enum":[1.0,2,3]}}`)
	f.Add(`{"name":"a","annotations":{"readOnlyHint":true}}`, `{"name":"b","annotations":{}}`)
	f.Add(`{"name":"a","x":null}`, `{"name":"a"}`)
	f.Fuzz(func(t *testing.T, a, b string) {
		sa, err := snapshot.New("2026-07-28", snapshot.ServerInfo{}, []json.RawMessage{json.RawMessage(a)})
		if err != nil {
			return
		}
		sb, err := snapshot.New("2026-07-28", snapshot.ServerInfo{}, []json.RawMessage{json.RawMessage(b)})
		if err != nil {
			return
		}
		self, err := Compare(sa, sa)
		if err != nil {
			t.Fatalf("Compare(x, x): %v", err)
		}
		if !self.Empty() || self.Counts != nil {
			t.Fatalf("Compare(x, x) = %+v, want empty", self)
		}
		rep, err := Compare(sa, sb)
		if err != nil {
			t.Fatalf("Compare: %v", err)
		}
		if (sa.Digest == sb.Digest) != rep.Empty() {
			t.Fatalf("digests %s/%s but report empty=%v", sa.Digest, sb.Digest, rep.Empty())
		}
		for _, td := range rep.Tools {
			if len(td.Classes) == 0 {
				t.Fatalf("tool %q has no class", td.Name)
			}
			if td.Kind == KindChanged && len(td.Changes) == 0 {
				t.Fatalf("changed tool %q has no change", td.Name)
			}
			for _, c := range td.Changes {
				if len(c.Classes) == 0 {
					t.Fatalf("change %q has no class", c.Path)
				}
			}
		}
	})
}
