package ociregistry

import (
	"encoding/json"
	"regexp"
	"testing"

	"github.com/b10x/connector-mcp/ocipack"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// FuzzParseManifest: the parser never panics; an accepted manifest respects every bound and the
// pack shape, and the same bytes are accepted by a looser limit.
func FuzzParseManifest(f *testing.F) {
	layer := ocispec.Descriptor{MediaType: ocipack.ProfileMediaType, Digest: digest.FromString("x"), Size: 100}
	m := ocispec.Manifest{MediaType: ocispec.MediaTypeImageManifest, ArtifactType: ocipack.PackArtifactType,
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
			var r *ocipack.RefusalError
			if !errorsAs(err, &r) || r.Name == "" {
				t.Fatalf("error is not a named refusal: %v", err)
			}
			return
		}
		if len(data) > 4096 || len(got.Layers) == 0 || len(got.Layers) > maxLayers || got.ArtifactType != ocipack.PackArtifactType {
			t.Fatalf("accepted a manifest outside the bounds or shape: %s", data)
		}
		var total int64
		for _, l := range got.Layers {
			if l.MediaType != ocipack.ProfileMediaType || l.Size <= 0 || l.Size > maxLayer || l.Digest.Validate() != nil {
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
