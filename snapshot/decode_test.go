package snapshot

import (
	"encoding/json"
	"errors"
	"testing"
)

// Unmarshal binds only exact-case member names; encoding/json, the pitfall it replaces, binds a
// case variant and lets the last one win.
func TestUnmarshalExactCase(t *testing.T) {
	type doc struct {
		InputSchema json.RawMessage `json:"inputSchema"`
		IsError     bool            `json:"isError"`
		Nested      struct {
			TaskSupport string `json:"taskSupport"`
		} `json:"execution"`
	}
	for _, in := range []string{
		`{"inputSchema":{"strict":true},"InputSchema":{},"isError":true,"IsError":false,"execution":{"taskSupport":"required","TaskSupport":"never"},"Execution":{}}`,
		`{"InputSchema":{},"inputSchema":{"strict":true},"ISERROR":false,"isError":true,"EXECUTION":{"taskSupport":"never"},"execution":{"TASKSUPPORT":"never","taskSupport":"required"}}`,
	} {
		var got doc
		if err := Unmarshal([]byte(in), &got); err != nil {
			t.Fatal(err)
		}
		if string(got.InputSchema) != `{"strict":true}` || !got.IsError || got.Nested.TaskSupport != "required" {
			t.Fatalf("%s decoded as %+v", in, got)
		}
	}
	// Twin: encoding/json, case-insensitive, lets the trailing variants win.
	var folded doc
	in := `{"inputSchema":{"strict":true},"InputSchema":{},"isError":true,"IsError":false}`
	if err := json.Unmarshal([]byte(in), &folded); err != nil || string(folded.InputSchema) != `{}` || folded.IsError {
		t.Fatalf("encoding/json read %+v (%v): the pitfall this test names is gone", folded, err)
	}
	// Only a case variant: the field stays empty, the variant is an unknown member.
	var got doc
	if err := Unmarshal([]byte(`{"InputSchema":{"type":"object"},"IsError":true}`), &got); err != nil || got.InputSchema != nil || got.IsError {
		t.Fatalf("case variants bound: %+v %v", got, err)
	}
}

func TestUnmarshalRefusals(t *testing.T) {
	var v struct {
		A int `json:"a"`
	}
	for _, c := range []struct {
		in, refusal string
		reason      error
	}{
		{`{"a":1,"a":2}`, "duplicate_key", ErrDuplicateKey},
		{`{"b":{"x":1,"x":1},"a":1}`, "duplicate_key", ErrDuplicateKey},
		{"{\"a\":\"\xff\"}", "invalid_utf8", ErrInvalidUTF8},
		{`{"a":1} {}`, "invalid_json", ErrInvalidJSON},
		{`{"a":"one"}`, "invalid_json", ErrInvalidJSON},
	} {
		err := Unmarshal([]byte(c.in), &v)
		var r *RefusalError
		if !errors.As(err, &r) || r.Name != c.refusal || !errors.Is(err, c.reason) {
			t.Fatalf("%q: %v, want %s", c.in, err, c.refusal)
		}
	}
	// Twin: numbers are not restricted (documents passed on, not digested).
	var n struct {
		A json.RawMessage `json:"a"`
	}
	if err := Unmarshal([]byte(`{"a":9007199254740993}`), &n); err != nil || string(n.A) != "9007199254740993" {
		t.Fatalf("%s %v", n.A, err)
	}
}
