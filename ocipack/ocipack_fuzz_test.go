package ocipack

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
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

// FuzzParseManifest: the parser never panics; an accepted manifest respects every bound and the
// pack shape, and the same bytes are accepted by a looser limit.
func FuzzParseManifest(f *testing.F) {
	layer := ocispec.Descriptor{MediaType: ProfileMediaType, Digest: digest.FromString("x"), Size: 100}
	m := ocispec.Manifest{MediaType: ocispec.MediaTypeImageManifest, ArtifactType: PackArtifactType,
		Config: ocispec.DescriptorEmptyJSON, Layers: []ocispec.Descriptor{layer, layer}}
	m.SchemaVersion = 2
	good, _ := json.Marshal(m)
	f.Add(good, 4, int64(1000))
	f.Add(good, 1, int64(1000))
	f.Add(good, 4, int64(50))
	f.Add([]byte(`{"schemaVersion":2,"schemaVersion":2}`), 4, int64(1000))
	f.Add([]byte(`[]`), 1, int64(1))
	f.Fuzz(func(t *testing.T, data []byte, maxLayers int, maxLayer int64) {
		if maxLayers <= 0 || maxLayers > 64 || maxLayer <= 0 {
			return
		}
		lim := Limits{MaxManifestBytes: 4096, MaxLayers: maxLayers, MaxLayerBytes: maxLayer, MaxTotalBytes: 4 * maxLayer}
		got, err := ParseManifest(data, lim)
		if err != nil {
			var r *RefusalError
			if !errorsAs(err, &r) || r.Name == "" {
				t.Fatalf("error is not a named refusal: %v", err)
			}
			return
		}
		if len(data) > 4096 || len(got.Layers) == 0 || len(got.Layers) > maxLayers || got.ArtifactType != PackArtifactType {
			t.Fatalf("accepted a manifest outside the bounds or shape: %s", data)
		}
		var total int64
		for _, l := range got.Layers {
			if l.MediaType != ProfileMediaType || l.Size <= 0 || l.Size > maxLayer || l.Digest.Validate() != nil {
				t.Fatalf("accepted a bad layer %+v", l)
			}
			total += l.Size
		}
		if total > 4*maxLayer {
			t.Fatalf("accepted %d bytes of layers over the %d total bound", total, 4*maxLayer)
		}
		if _, err := ParseManifest(data, Limits{MaxManifestBytes: 8192, MaxLayers: 64, MaxLayerBytes: maxLayer * 2, MaxTotalBytes: 8 * maxLayer}); err != nil {
			t.Fatalf("a looser limit refused what a tighter one accepted: %v", err)
		}
	})
}

// FuzzCheckSubjectRegExpAnchored: an expression CheckSubjectRegExp accepts matches a subject
// only as a whole: it matches exactly the subjects that \A(?:expr)\z matches, so no branch of an
// accepted expression matches a mere prefix or suffix (issue 21, finding 7: "^a|b$").
func FuzzCheckSubjectRegExpAnchored(f *testing.F) {
	f.Add(`^a|b$`, "xb")
	f.Add(`^a|b$`, "ax")
	f.Add(`^(a|b)$`, "ab")
	f.Add(`^a$|^b$`, "a")
	f.Add(`\Ahttps://github\.com/acme/.*\z`, "https://github.com/acme/x")
	f.Add(`^https://github\.com/acme/`, "https://github.com/acme/evil")
	f.Add(`(?m)^a$`, "x\na")
	f.Fuzz(func(t *testing.T, expr, subject string) {
		if CheckSubjectRegExp(expr) != nil {
			return
		}
		whole := regexp.MustCompile(`\A(?:` + expr + `)\z`)
		if got, want := regexp.MustCompile(expr).MatchString(subject), whole.MatchString(subject); got != want {
			t.Fatalf("accepted %q matches %q: %v, as a whole: %v", expr, subject, got, want)
		}
	})
}
