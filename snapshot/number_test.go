package snapshot

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// Numbers that RFC 8785 would merge with another number are refused by name, with their
// position, by every digest entry point; each has a twin that is accepted.
func TestUnsafeNumbers(t *testing.T) {
	cases := []struct {
		name, refused, twin string
	}{
		{"integer beyond 2^53", `9007199254740993`, `9007199254740991`},
		{"integer at 2^53", `9007199254740992`, `-9007199254740991`},
		{"negative integer beyond 2^53", `-9007199254740993`, `-12`},
		{"int64 maximum", `9223372036854775807`, `9.223372036854776e18`},
		{"beyond uint64", `123456789012345678901234567890`, `1.2345678901234568e29`},
		{"underflow", `1e-400`, `1e-300`},
		{"negative underflow", `-1e-400`, `-1e-300`},
		{"subnormal rounding", `2e-324`, `5e-324`},
		{"overflow", `1e400`, `1e300`},
		{"negative overflow", `-1.8e308`, `-1.7976931348623157e308`},
		{"negative zero", `-0`, `0`},
		{"negative zero fraction", `-0.0`, `0.0`},
		{"negative zero exponent", `-0e5`, `0e5`},
		{"excess precision", `0.1000000000000000000001`, `0.1`},
		{"RFC 8785 sample", `333333333.33333329`, `333333333.3333333`},
		{"precision hidden by exponent", `9007199254740993e0`, `9007199254740992e0`},
		{"exponent beyond nine digits", `1e-1000000000`, `1e-0000000000000000099`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc := `{"name":"t","inputSchema":{"type":"object","properties":{"n":{"type":"number","maximum":` + c.refused + `}}}}`
			at := int64(strings.Index(doc, c.refused))
			check := func(what string, err error) {
				t.Helper()
				var r *RefusalError
				if !errors.As(err, &r) || r.Name != "unsafe_number" || !errors.Is(err, ErrUnsafeNumber) {
					t.Fatalf("%s(%s) = %v, want unsafe_number", what, c.refused, err)
				}
				if r.Offset != 0 && r.Offset != at {
					t.Fatalf("%s: offset %d, want %d", what, r.Offset, at)
				}
			}
			_, err := Canonicalize([]byte(doc))
			check("Canonicalize", err)
			var cr *RefusalError
			if errors.As(err, &cr); cr.Path != "/inputSchema/properties/n/maximum" {
				t.Fatalf("path %q", cr.Path)
			}
			_, err = DescriptorDigest([]byte(doc))
			check("DescriptorDigest", err)
			_, err = New("2026-07-28", ServerInfo{}, []json.RawMessage{json.RawMessage(doc)})
			check("New", err)
			var r *RefusalError
			if errors.As(err, &r); r.Tool != "t" {
				t.Fatalf("New: tool %q", r.Tool)
			}
			// A recorded snapshot carrying it does not verify either.
			rec := &ToolSnapshot{ProtocolVersion: "2026-07-28", Tools: []Tool{{Name: "t", Descriptor: json.RawMessage(doc)}}}
			check("Verify", rec.Verify())
			// Validate (arguments and results, passed on byte for byte) admits it.
			if err := Validate([]byte(doc)); err != nil {
				t.Fatalf("Validate: %v", err)
			}

			twin := `{"name":"t","inputSchema":{"type":"object","properties":{"n":{"type":"number","maximum":` + c.twin + `}}}}`
			if _, err := New("2026-07-28", ServerInfo{}, []json.RawMessage{json.RawMessage(twin)}); err != nil {
				t.Fatalf("twin %s: %v", c.twin, err)
			}
		})
	}
}

// The collisions the refusal prevents: without it these pairs would share a digest.
func TestUnsafeNumbersWouldCollide(t *testing.T) {
	for _, pair := range [][2]string{
		{`[9007199254740993]`, `[9007199254740992.0]`},
		{`[1e-400]`, `[0]`},
		{`[-0]`, `[0]`},
		{`[333333333.33333329]`, `[333333333.3333333]`},
	} {
		a, aerr := transform([]byte(pair[0]))
		b, berr := transform([]byte(pair[1]))
		if aerr != nil || berr != nil || string(a) != string(b) {
			t.Fatalf("%s and %s: %s %s (%v %v): RFC 8785 no longer merges them; revisit checkNumber", pair[0], pair[1], a, b, aerr, berr)
		}
		if _, err := Canonicalize([]byte(pair[0])); !errors.Is(err, ErrUnsafeNumber) {
			t.Fatalf("%s: %v", pair[0], err)
		}
		if _, err := Canonicalize([]byte(pair[1])); err != nil {
			t.Fatalf("%s: %v", pair[1], err)
		}
	}
}
