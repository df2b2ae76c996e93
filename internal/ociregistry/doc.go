// Package ociregistry moves and proves profile packs (the format of package ocipack).
//
// The package has four parts:
//
//   - The registry client: Client.Push builds an OCI image manifest v1.1 with artifactType
//     ocipack.PackArtifactType, the empty config and one canonical-JSON layer per profile;
//     Client.Pull fetches by digest only, within Limits, every blob through a digest-verifying
//     reader. Client.HTTPClient is injectable (the egress guarded client in hosted mode);
//     CredentialsFromDockerConfig reads Docker config / dockerconfigjson credentials and
//     CredentialsFromDockerConfigFile also runs the Docker credential helpers a CLI config names.
//   - Verification: Verifier checks sigstore bundles attached as OCI referrers of the pack (native
//     referrers API or the tag-schema fallback) against a trusted root or a public key, an identity
//     policy and an SLSA provenance v1 policy (builder, source repository and ref: the merge
//     verification), and returns a typed Result. Every failed check is a named
//     *ocipack.RefusalError.
//   - Signing: Signer attaches cosign --new-bundle-format bundles (a signature statement and a
//     provenance attestation); LoadPrivateKey reads cosign's encrypted keys or plain PEM keys.
//   - Outage resilience: a BlobStore (Client.Store) keeps the raw content of each verification
//     by digest; while the registry is unavailable (RegistryError.Unavailable) the client reads
//     it instead, checks every blob against its digest, and the Verifier verifies it again. It
//     is content below verification, never a verdict.
//
// See docs/packs.md for the semantics and the mcpctl commands built on this package.
package ociregistry
