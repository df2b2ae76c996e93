package snapshot

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
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

// TestMembersAndElements: the elements of the named array member come back as received, in
// order (nested arrays and strings holding brackets included), with the members and their
// offsets; an empty array gives an empty, non-nil list.
func TestMembersAndElements(t *testing.T) {
	raw := []byte(` {"x":[9], "tools" : [ {"name":"a","d":"}]\"{["} , [[1]],"s" ], "n":{"tools":[2]}} `)
	ms, elems, err := MembersAndElements(raw, "tools")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`{"name":"a","d":"}]\"{["}`, `[[1]]`, `"s"`}
	if len(elems) != len(want) {
		t.Fatalf("got %d elements: %q", len(elems), elems)
	}
	for i := range want {
		if string(elems[i]) != want[i] {
			t.Errorf("element %d: got %s, want %s", i, elems[i], want[i])
		}
	}
	if len(ms) != 3 || ms[1].Name != "tools" || string(raw[ms[1].Offset:ms[1].Offset+len(ms[1].Value)]) != string(ms[1].Value) || ms[1].Value[0] != '[' {
		t.Fatalf("members: %+v", ms)
	}
	if _, elems, err := MembersAndElements([]byte(`{"tools":[]}`), "tools"); err != nil || elems == nil || len(elems) != 0 {
		t.Fatalf("empty array: %q, %v", elems, err)
	}
}

// TestMembersAndElementsRefusals is TestMembersAndElements' must-fail twin: no elements for a
// member that is absent, not an array, or spelled in another case, and a refusal by name for an
// invalid element.
func TestMembersAndElementsRefusals(t *testing.T) {
	for _, raw := range []string{`{"tools":{}}`, `{"Tools":[1]}`, `{"x":[1]}`, `{"x":{"tools":[1]}}`, `{"tools":"[1]"}`} {
		if _, elems, err := MembersAndElements([]byte(raw), "tools"); err != nil || elems != nil {
			t.Errorf("%s: got %q, %v, want no elements", raw, elems, err)
		}
	}
	for _, tc := range []struct{ raw, name string }{
		{`{"tools":[{"a":1,"a":2}]}`, "duplicate_key"},
		{"{\"tools\":[\"\xff\"]}", "invalid_utf8"},
		{`{"tools":[1,]}`, "invalid_json"},
		{`[{"tools":[]}]`, "invalid_json"},
	} {
		_, _, err := MembersAndElements([]byte(tc.raw), "tools")
		var r *RefusalError
		if !errors.As(err, &r) || r.Name != tc.name {
			t.Errorf("%s: got %v, want refusal %s", tc.raw, err, tc.name)
		}
	}
}

// TestMembersReusedScanner: the scanners Members and MembersAndElements reuse keep nothing of
// the documents before — an escaped name, a refused document, an elements array or a deep
// document first, each answer is still the one a fresh scan gives, and a repeated name of the
// previous document is no duplicate of the next.
func TestMembersReusedScanner(t *testing.T) {
	docs := []string{
		`{"a\u0062":1,"deep":{"x":[{"y":{"z":2}}]},"tools":[1,2]}`,
		`{"dup":1,"dup":2}`,
		`{"tools":[{"n":1},{"n":2},{"n":3}],"b":true}`,
		`{"ab":3}`,
		`[1,2]`,
		`{"k":"v"}`,
	}
	type answer struct {
		members string
		elems   int
		err     string
	}
	run := func(doc string) answer {
		ms, elems, err := MembersAndElements([]byte(doc), "tools")
		var names []string
		for _, m := range ms {
			names = append(names, m.Name+"="+string(m.Value))
		}
		a := answer{members: strings.Join(names, ","), elems: len(elems)}
		if err != nil {
			a.err = err.Error()
		}
		return a
	}
	want := make([]answer, len(docs))
	for i, d := range docs {
		splitters = sync.Pool{New: func() any { return new(scanner) }} // a fresh scanner
		want[i] = run(d)
	}
	for round := range 3 {
		for i, d := range docs {
			if got := run(d); got != want[i] {
				t.Fatalf("round %d, %s: %+v, want %+v", round, d, got, want[i])
			}
			if ms, err := Members([]byte(d)); (err == nil) != (want[i].err == "") || (err == nil && len(ms) == 0) {
				t.Fatalf("round %d, Members(%s) = %v, %v", round, d, ms, err)
			}
		}
	}
	if want[3].members != "ab=3" || want[1].err == "" || want[2].elems != 3 {
		t.Fatalf("fresh answers %+v", want)
	}
}

// A scanner whose stacks grew past maxPooledSplitterMembers (one huge document) is not kept for
// reuse: the pool does not pin its scratch space.
func TestReleaseSplitterDropsLargeScanners(t *testing.T) {
	splitters = sync.Pool{New: func() any { return new(scanner) }}
	big := &scanner{members: make([]member, 0, maxPooledSplitterMembers+1)}
	releaseSplitter(big)
	if got := splitters.Get().(*scanner); got == big || cap(got.members) > maxPooledSplitterMembers {
		t.Fatal("a scanner with stacks past the bound was pooled")
	}
}
