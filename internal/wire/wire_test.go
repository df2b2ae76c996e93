package wire

import (
	"encoding/json"
	"testing"
)

func TestMarshalAsJSONRPC2(t *testing.T) {
	b, err := Marshal(map[string]any{"a": "<&>", "r": json.RawMessage(`{ "x" : 1 }`)})
	if err != nil || string(b) != `{"a":"<&>","r":{"x":1}}` {
		t.Fatalf("Marshal = %s, %v", b, err)
	}
}

func TestMediaTypes(t *testing.T) {
	for _, c := range []struct {
		v      string
		media  string
		isJSON bool
	}{
		{"application/json", "application/json", true},
		{"Application/JSON; charset=utf-8", "application/json", true},
		{"application/json; charset", "application/json", false}, // a malformed parameter
		{"text/event-stream", "text/event-stream", false},
		{"", "", false},
	} {
		if got := MediaType(c.v); got != c.media {
			t.Errorf("MediaType(%q) = %q, want %q", c.v, got, c.media)
		}
		if got := IsJSON(c.v); got != c.isJSON {
			t.Errorf("IsJSON(%q) = %v, want %v", c.v, got, c.isJSON)
		}
	}
}

func TestAcceptsJSONAndStream(t *testing.T) {
	for _, c := range []struct {
		values []string
		want   bool
	}{
		{[]string{AcceptJSONAndStream}, true},
		{[]string{"application/json", "text/event-stream"}, true},
		{[]string{"*/*"}, true},
		{[]string{"application/*;q=0.5, TEXT/*"}, true},
		{[]string{"application/json"}, false},
		{[]string{"text/event-stream"}, false},
		{nil, false},
	} {
		if got := AcceptsJSONAndStream(c.values); got != c.want {
			t.Errorf("AcceptsJSONAndStream(%q) = %v, want %v", c.values, got, c.want)
		}
	}
}
