package mcpclient

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/b10x/connector-mcp/snapshot"
)

// splitPage is the page sdkListResult rewrites: read by readPage (the strict split), its "tools"
// member name spelled plainly; ok is false for any other page.
func splitPage(raw []byte) ([]json.RawMessage, *string, bool) {
	p, err := readPage(raw)
	if err != nil || !p.plainTools {
		return nil, nil, false
	}
	return p.tools, p.next, true
}

// parsePageTokens is the reference reader of a tools/list result: encoding/json token by token,
// member names of the result object unique, the descriptors not checked (snapshot.New checks them
// when frozen).
func parsePageTokens(raw []byte) ([]json.RawMessage, *string, error) {
	const op = "tools/list"
	invalid := refuse(RefusalInvalidResponse, op, 0, ErrInvalidResponse)
	if !utf8.Valid(raw) {
		return nil, nil, &snapshot.RefusalError{Name: snapshot.RefusalInvalidUTF8, Err: snapshot.ErrInvalidUTF8}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, invalid
	}
	var (
		tools []json.RawMessage
		next  *string
		seen  = map[string]bool{}
	)
	for dec.More() {
		tok, err := dec.Token()
		key, ok := tok.(string)
		if err != nil || !ok {
			return nil, nil, invalid
		}
		if seen[key] {
			return nil, nil, &snapshot.RefusalError{Name: snapshot.RefusalDuplicateKey, Err: snapshot.ErrDuplicateKey}
		}
		seen[key] = true
		switch key {
		case "tools":
			if err := dec.Decode(&tools); err != nil {
				return nil, nil, invalid
			}
		case "nextCursor":
			if err := dec.Decode(&next); err != nil {
				return nil, nil, invalid
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, nil, invalid
			}
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, invalid
	}
	if tools == nil {
		return nil, nil, invalid
	}
	return tools, next, nil
}

// FuzzParsePageMatchesTokens: a page that is JSON (the transports refuse any other frame before a
// page is read) and that the strict split (splitPage) accepts is read exactly as the token-by-token
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

// TestSplitPage: the strict split reads a page's descriptors as received (nested strings holding
// brackets and escaped quotes included) and its cursor; its twins are pages it does not hand
// back: refused (a repeated member name, "tools" not an array, a cursor that is not a string, a
// duplicate or invalid member outside the descriptors, trailing data, invalid UTF-8) or, for an
// escaped "tools" name, read but not rewritten for the SDK.
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
			t.Errorf("%s: split, want it refused or not rewritten", raw)
		}
	}
}
