package ocipack

// Media types of the profile-pack format (DESIGN.md §5).
const (
	// PackArtifactType is the artifactType of a profile-pack manifest.
	PackArtifactType = "application/vnd.b10x.mcp-profile-pack.v1"
	// ProfileMediaType is the media type of a pack layer: one profile document in canonical JSON.
	ProfileMediaType = "application/vnd.b10x.mcp-service-profile.v1+json"
	// BundleMediaType is the media type (and referrer artifactType) of a sigstore bundle attached
	// to a pack, the cosign --new-bundle-format convention.
	BundleMediaType = "application/vnd.dev.sigstore.bundle.v0.3+json"
)
