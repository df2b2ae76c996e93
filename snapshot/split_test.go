package snapshot

import (
	"encoding/json"
	"errors"
	"testing"
)

// TestMembers: the top-level members come back in document order, names decoded, values byte for
// byte as received (whitespace inside them kept).
func TestMembers(t *testing.T) {
	raw := []byte(` {"tools" : [ {"name":"a"} ,{"name":"b"}], "next\u0043ursor":"c2", "x":{"y": [1, 2]}} `)
	ms, err := Members(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := []Member{{Name: "tools", Value: json.RawMessage(`[ {"name":"a"} ,{"name":"b"}]`)}, {Name: "nextCursor", Value: json.RawMessage(`"c2"`)}, {Name: "x", Value: json.RawMessage(`{"y": [1, 2]}`)}}
	if len(ms) != len(want) {
		t.Fatalf("got %d members", len(ms))
	}
	for i := range want {
		if ms[i].Name != want[i].Name || string(ms[i].Value) != string(want[i].Value) {
			t.Errorf("member %d: got %s=%s, want %s=%s", i, ms[i].Name, ms[i].Value, want[i].Name, want[i].Value)
		}
	}
}

// TestMembersRefusals is TestMembers' must-fail twin: whatever Validate refuses, and a valid
// document that is not an object, is refused by name.
func TestMembersRefusals(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		name string
	}{
		{`{"a":1,"a":2}`, "duplicate_key"},
		{`{"a":{"b":1,"b":2}}`, "duplicate_key"},
		{"{\"a\":\"\xff\"}", "invalid_utf8"},
		{`{"a":"\udc00"}`, "invalid_utf8"},
		{`{"a":1} {}`, "invalid_json"},
		{`[1,2]`, "invalid_json"},
		{`"a"`, "invalid_json"},
		{`{"a":`, "invalid_json"},
	} {
		_, err := Members([]byte(tc.raw))
		var r *RefusalError
		if !errors.As(err, &r) || r.Name != tc.name {
			t.Errorf("%s: got %v, want refusal %s", tc.raw, err, tc.name)
		}
	}
}
