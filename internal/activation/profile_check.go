package activation

import (
	"errors"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/ocipack"
	"github.com/b10x/connector-mcp/refusal"
	"github.com/b10x/connector-mcp/snapshot"
)

// CheckProfile decides whether a profile document is a complete, reviewed profile whose recorded
// digests reconstruct, using the ocipack checks (the same ones a pack layer is held to). It
// returns the recorded snapshot on success. Refusals carry the SourceVerified condition (fields,
// mapping, effects; reason ProfileInvalid) or SnapshotReconstructed (digests; reason
// SnapshotDigestMismatch).
func CheckProfile(doc *v1.ProfileDocument) (*snapshot.ToolSnapshot, *StageError) {
	if doc == nil {
		return nil, ProfileInvalid.New("the profile has no document")
	}
	for _, check := range []ocipack.Check{ocipack.ValidateFields, ocipack.ValidateMapping, ocipack.ValidateEffects} {
		if err := check(doc); err != nil {
			return nil, ProfileInvalid.Wrap(err, "the profile document is refused: %s", RefusalText(err, "invalid"))
		}
	}
	rec, err := ocipack.SnapshotOf(doc)
	if err != nil {
		return nil, SnapshotDigestMismatch.Wrap(err, "the recorded snapshot does not reconstruct: %s", RefusalText(err, "invalid"))
	}
	return rec, nil
}

// RefusalText renders err for a condition message: the stable refusal name (with the document
// path for ocipack refusals, as "name at path"), clipped, never document or server text;
// fallback when err carries no refusal name.
func RefusalText(err error, fallback string) string {
	var r *ocipack.RefusalError
	if errors.As(err, &r) {
		if r.Path != "" {
			return clipN(r.Name, 64) + " at " + clipN(r.Path, 128)
		}
		return clipN(r.Name, 64)
	}
	if name := refusal.Name(err); name != "" {
		return clipN(name, 64)
	}
	return fallback
}
