package snapshot

// The reference RFC 8785 serializer (cyberphone/json-canonicalization), kept as an independent
// oracle for the single-pass canonicalizer in scan.go (FuzzCanonicalMatchesReference).

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"
)

// transform runs the reference RFC 8785 serializer on input already checked by validate.
func transform(raw []byte) ([]byte, error) {
	trimmed := bytes.TrimSpace(raw)
	scalar := len(trimmed) > 0 && trimmed[0] != '{' && trimmed[0] != '['
	in := trimmed
	if scalar {
		// The serializer only accepts an object or array at the top level: wrap and unwrap.
		in = make([]byte, 0, len(trimmed)+2)
		in = append(in, '[')
		in = append(in, trimmed...)
		in = append(in, ']')
	}
	out, err := jsoncanonicalizer.Transform(in)
	if err != nil {
		return nil, &RefusalError{Name: "unsafe_number", Err: ErrUnsafeNumber}
	}
	if scalar {
		out = out[1 : len(out)-1]
	}
	return out, nil
}

// referenceSeeds exercise what the single-pass canonicalizer must get exactly as the reference
// does: member order by UTF-16 code units (supplementary characters before U+E000..U+FFFF),
// escapes, every number form, nesting and whitespace.
var referenceSeeds = []string{
	`{"name":"echo","inputSchema":{"type":"object","properties":{"x":{"type":"string"}}}}`,
	`{"b":[1,2.5,1e3,true,null,false],"a":{"z":"\u00e9","y":"\ud83d\ude00"}}`,
	`{"\uE000":1,"\ud83d\ude00":2,"\uFFFF":3,"a":4,"\u00e9":5,"":6,"ab":7,"a\u0000":8}`,
	`{"z":{"y":{"x":[{"c":1,"b":2,"a":3}]}},"y":[],"x":{}}`,
	` { "s" : "tab\there \"q\" \\ \/ \b\f\n\r \u0001 \u001f \u007f \u2028 " } `,
	`[0,-1,1.5,-1.5e-7,1E21,1e-7,123456789012345,0.1,1e2,100e-2,9007199254740991,-9007199254740991,5e-324,1.7976931348623157e308]`,
	`"just a string"`, `12.50`, `true`, `null`, `[]`, `{}`,
	`{"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k17":17,"k18":18,"k0":0}`,
}

// TestCanonicalizeMatchesReference: the single-pass canonical form is byte for byte the reference
// serializer's, and a refused input (its twin) is refused by name before any output.
func TestCanonicalizeMatchesReference(t *testing.T) {
	for _, in := range referenceSeeds {
		got, err := Canonicalize([]byte(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		want, err := transform([]byte(in))
		if err != nil {
			t.Fatalf("reference refused %s: %v", in, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("canonical form differs for %s:\n got %s\nwant %s", in, got, want)
		}
	}
	for in, name := range map[string]string{
		`{"b":1,"a":2,"b":3}`:          "duplicate_key",
		`{"b":1,"a":9007199254740993}`: "unsafe_number",
		`{"b":"\ud800","a":1}`:         "invalid_utf8",
		`{"b":1,"a":2} x`:              "invalid_json",
	} {
		got, err := Canonicalize([]byte(in))
		var r *RefusalError
		if !errors.As(err, &r) || r.Name != name || got != nil {
			t.Errorf("%s: got %q, %v; want refusal %s", in, got, err, name)
		}
	}
}

// FuzzCanonicalMatchesReference: whatever the single-pass canonicalizer accepts, the reference
// serializer turns into the same bytes.
func FuzzCanonicalMatchesReference(f *testing.F) {
	for _, s := range append(referenceSeeds, fuzzSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := Canonicalize(raw)
		if err != nil {
			return
		}
		want, err := transform(raw)
		if err != nil {
			t.Fatalf("reference refused accepted input %q: %v", raw, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("canonical form differs for %q:\n got %q\nwant %q", raw, got, want)
		}
	})
}
