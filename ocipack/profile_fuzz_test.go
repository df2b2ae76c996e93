package ocipack

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzDecodeProfile: the decoder never panics, and whatever it accepts is stable: decode →
// encode (canonical JSON and YAML) → decode yields the same profile digest and the same canonical
// bytes, and the canonical form is a fixed point.
func FuzzDecodeProfile(f *testing.F) {
	doc := reviewedProfile(f)
	js, _ := EncodeProfile(doc, FormatJSON)
	y, _ := EncodeProfile(doc, FormatYAML)
	f.Add(js)
	f.Add(y)
	f.Add([]byte(strings.Replace(string(js), `"effect":"read"`, `"effect":"read","effect":"write"`, 1)))
	f.Add([]byte(`{"contract":"b10x.connector-mcp-service.v1"}`))
	f.Add([]byte("contract: b10x.connector-mcp-service.v1\n---\n"))
	f.Add([]byte(`{"contract":"b10x.connector-mcp-service.v1","snapshot":{"tools":[{"descriptor":{"name":"\ud800"}}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d1, err := DecodeProfile(data)
		if err != nil {
			var r *RefusalError
			if !errorsAs(err, &r) || r.Name == "" {
				t.Fatalf("error is not a named refusal: %v", err)
			}
			return
		}
		c1, err := EncodeProfile(d1, FormatJSON)
		if err != nil {
			return // e.g. a descriptor number RFC 8785 cannot represent
		}
		d2, err := DecodeProfile(c1)
		if err != nil {
			t.Fatalf("canonical form of an accepted document is refused: %v\n%s", err, c1)
		}
		c2, err := EncodeProfile(d2, FormatJSON)
		if err != nil || !bytes.Equal(c1, c2) {
			t.Fatalf("canonical form is not a fixed point:\n%s\n%s", c1, c2)
		}
		y1, err := EncodeProfile(d1, FormatYAML)
		if err != nil {
			t.Fatalf("YAML encoding failed: %v", err)
		}
		d3, err := DecodeProfile(y1)
		if err != nil {
			t.Fatalf("YAML form of an accepted document is refused: %v\n%s", err, y1)
		}
		p1, _ := ProfileDigest(d1)
		p3, _ := ProfileDigest(d3)
		if p1 != p3 {
			t.Fatalf("YAML round trip changed the profile digest:\n%s", y1)
		}
		// Validation is pure and total on decoded documents.
		_ = Validate(d1)
		_ = ValidateDraft(d1)
	})
}
