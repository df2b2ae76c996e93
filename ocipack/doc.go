// Package ocipack is the profile-pack format: reviewed McpServiceProfile documents delivered as
// immutable OCI artifacts with sigstore provenance.
//
// The package owns what describes the format itself, and imports no registry or sigstore
// library:
//
//   - The profile document codec: DecodeProfile (strict JSON or YAML into apiv1.ProfileDocument,
//     refusals naming the JSON path of the offending field), EncodeProfile (canonical JSON or
//     YAML), ProfileDigest, SnapshotOf and Draft.
//   - Pure validation: Validate, ValidateDraft, Reviewed and the individual Check functions.
//   - The media and artifact types of a pack (PackArtifactType, ProfileMediaType,
//     BundleMediaType).
//   - The stable refusal names of packs, registries and verification, their sentinel reasons
//     and RefusalError, the named error every refusal is.
//
// The registry client, the outage BlobStore, verification and signing are operator-internal
// (package internal/ociregistry). See docs/packs.md for the semantics and the mcpctl commands.
package ocipack
