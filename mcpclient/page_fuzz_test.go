package mcpclient

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzParsePageMatchesTokens: a page that is JSON (the transports refuse any other frame before a
// page is read) and that the light split (splitPage) accepts is read exactly as the token-by-token
// reader reads it: the same descriptors byte for byte and the same cursor. splitPage never panics,
// whatever the input.
func FuzzParsePageMatchesTokens(f *testing.F) {
	for _, s := range []string{
		`{"tools":[{"name":"a"},{"name":"b","inputSchema":{"type":"object"}}],"nextCursor":"c1"}`,
		`{"tools":[],"nextCursor":null,"_meta":{"x":1}}`,
		` { "nextCursor" : "\u0063" , "tools" : [ 1 , "x" , { } ] } `,
		`{"tools":[{"name":"a","name":"b"}]}`,
		`{"Tools":[]}`,
		`{"tools":null}`,
		`{"tools":[],"nextCursor":5}`,
		`{"tools":[{"a":"}]\"{["}, [[]], "x\\"]}`,
		`{"tools":[{"a":1}}]}`,
		`{"tools":[{"a":[1}]]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		tools, next, ok := splitPage(raw)
		if !ok || !json.Valid(raw) {
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

// TestSplitPage: the light split reads a page's descriptors as received (nested strings holding
// brackets and escaped quotes included) and its cursor; its twins, pages it must not read itself
// (a repeated or escaped member name, "tools" not an array, a cursor that is not a string, a
// duplicate or invalid member outside the descriptors, trailing data, invalid UTF-8), go to the
// token reader.
func TestSplitPage(t *testing.T) {
	tools, next, ok := splitPage([]byte(` {"_meta":{"k":[1]}, "tools" : [ {"name":"a","d":"}]\"{["} , {"name":"b"} ],"nextCursor":"c"} `))
	if !ok || len(tools) != 2 || string(tools[0]) != `{"name":"a","d":"}]\"{["}` || string(tools[1]) != `{"name":"b"}` || next == nil || *next != "c" {
		t.Fatalf("got %q, %v, %v", tools, next, ok)
	}
	if tools, next, ok := splitPage([]byte(`{"tools":[]}`)); !ok || tools == nil || len(tools) != 0 || next != nil {
		t.Fatalf("empty page: %q, %v, %v", tools, next, ok)
	}
	for _, raw := range []string{
		`{"tools":[],"tools":[]}`,
		`{"\u0074ools":[]}`,
		`{"tools":{}}`,
		`{"tools":[],"nextCursor":1}`,
		`{"tools":[],"_meta":{"a":1,"a":2}}`,
		`{"tools":[]} x`,
		"{\"tools\":[\"\xff\"]}",
		`{"Tools":[]}`,
		`{"tools":[{"a":1}}]}`,
	} {
		if _, _, ok := splitPage([]byte(raw)); ok {
			t.Errorf("%s: split, want the token reader to decide", raw)
		}
	}
}
