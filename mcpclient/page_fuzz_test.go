package mcpclient

import (
	"bytes"
	"testing"
)

// FuzzParsePageMatchesTokens: a page the one-scan reader (splitPage) accepts is read exactly as
// the token-by-token reader reads it: the same descriptors byte for byte and the same cursor.
func FuzzParsePageMatchesTokens(f *testing.F) {
	for _, s := range []string{
		`{"tools":[{"name":"a"},{"name":"b","inputSchema":{"type":"object"}}],"nextCursor":"c1"}`,
		`{"tools":[],"nextCursor":null,"_meta":{"x":1}}`,
		` { "nextCursor" : "\u0063" , "tools" : [ 1 , "x" , { } ] } `,
		`{"tools":[{"name":"a","name":"b"}]}`,
		`{"Tools":[]}`,
		`{"tools":null}`,
		`{"tools":[],"nextCursor":5}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		tools, next, ok := splitPage(raw)
		if !ok {
			return
		}
		want, wantNext, err := parsePageTokens(raw)
		if err != nil {
			t.Fatalf("splitPage accepted a page the token reader refuses (%v): %q", err, raw)
		}
		if len(tools) != len(want) || (next == nil) != (wantNext == nil) || (next != nil && *next != *wantNext) {
			t.Fatalf("pages differ for %q", raw)
		}
		for i := range tools {
			if !bytes.Equal(bytes.TrimSpace(tools[i]), bytes.TrimSpace(want[i])) {
				t.Fatalf("descriptor %d differs: %q vs %q", i, tools[i], want[i])
			}
		}
	})
}
