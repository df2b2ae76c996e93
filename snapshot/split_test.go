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
	if ms[1].Elements != nil || ms[2].Elements != nil || len(ms[0].Elements) != 2 ||
		string(ms[0].Elements[0]) != `{"name":"a"}` || string(ms[0].Elements[1]) != `{"name":"b"}` {
		t.Fatalf("member elements: %q %q %q", ms[0].Elements, ms[1].Elements, ms[2].Elements)
	}
	if e, err := Members([]byte(`{"a":[],"b":[[1,2],{"c":[3]}]}`)); err != nil || e[0].Elements == nil || len(e[0].Elements) != 0 ||
		len(e[1].Elements) != 2 || string(e[1].Elements[0]) != `[1,2]` || string(e[1].Elements[1]) != `{"c":[3]}` {
		t.Fatalf("nested: %+v, %v", e, err)
	}
	els, err := Elements(ms[0].Value)
	if err != nil || len(els) != 2 || string(els[0]) != `{"name":"a"}` || string(els[1]) != `{"name":"b"}` {
		t.Fatalf("elements: %q, %v", els, err)
	}
}

// TestMembersRefusals is TestMembers' must-fail twin: whatever Validate refuses, and a valid
// document of the other shape, is refused by name.
func TestMembersRefusals(t *testing.T) {
	for _, tc := range []struct {
		raw   string
		array bool
		name  string
	}{
		{`{"a":1,"a":2}`, false, "duplicate_key"},
		{`{"a":{"b":1,"b":2}}`, false, "duplicate_key"},
		{"{\"a\":\"\xff\"}", false, "invalid_utf8"},
		{`{"a":"\udc00"}`, false, "invalid_utf8"},
		{`{"a":1} {}`, false, "invalid_json"},
		{`[1,2]`, false, "invalid_json"},
		{`{"a":1}`, true, "invalid_json"},
		{`[1,[2,{"k":1,"k":1}]]`, true, "duplicate_key"},
		{`[1,`, true, "invalid_json"},
	} {
		var err error
		if tc.array {
			_, err = Elements([]byte(tc.raw))
		} else {
			_, err = Members([]byte(tc.raw))
		}
		var r *RefusalError
		if !errors.As(err, &r) || r.Name != tc.name {
			t.Errorf("%s: got %v, want refusal %s", tc.raw, err, tc.name)
		}
	}
}
