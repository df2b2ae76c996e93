package activation

import (
	"context"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/snapshot"
)

// VerifyRequest asks for an OCI profile pack to be pulled by digest and verified.
type VerifyRequest struct {
	// Namespace is the profile's namespace (pull secret and public-key Secret live there).
	Namespace string
	// Ref is "REPOSITORY@sha256:<hex>".
	Ref string
	// PullSecret optionally names a dockerconfigjson Secret in Namespace.
	PullSecret *v1.LocalObjectReference
	// Policy is the profile's provenance policy; nil means the cluster default.
	Policy *v1.VerifyPolicy
}

// VerifiedSource is a pack that passed verification: its strictly decoded profile document and
// what was proven about it.
type VerifiedSource struct {
	// Document is the decoded, validated profile document.
	Document *v1.ProfileDocument
	// Snapshot is the document's recorded snapshot as the verifier's validation reconstructed it
	// (ocipack.Reviewed); the resolver then does not check the document again. Nil: the resolver
	// checks the document itself.
	Snapshot *snapshot.ToolSnapshot
	// PackDigest is the pack manifest digest.
	PackDigest string
	// ProfileDigest is the digest of the profile document's canonical form.
	ProfileDigest string
	// Provenance is the verified signer identity and build provenance.
	Provenance v1.VerifiedProvenance
}

// SourceVerifier pulls a profile pack by digest and verifies it against a provenance policy.
// Implementations cache results by (digest, policy) so that re-reading a verified pack makes no
// registry request. Errors are the libraries' own (ocipack, k8sbinding), or, for a step of the
// implementation that no library names, an error whose refusal name is one of the StepX
// constants wrapping its cause; ClassifyVerifyError turns them into SourceVerified outcomes
// (any other error: a transient RegistryUnavailable).
type SourceVerifier interface {
	VerifyPack(ctx context.Context, req VerifyRequest) (*VerifiedSource, error)
}

// FreezeRequest asks for the live tool list of a deployment's endpoint.
type FreezeRequest struct {
	// Namespace and Name identify the deployment (the credential Secret lives in Namespace).
	Namespace, Name string
	// URL is the Streamable HTTP endpoint.
	URL string
	// Credential optionally addresses the bearer token, read per exchange through egress.
	Credential *v1.CredentialRef
	// AllowCIDRs widens the cluster egress policy for this endpoint's private ranges.
	AllowCIDRs []string
	// CABundle optionally names the connection's own CA bundle (a ConfigMap key in Namespace).
	CABundle *v1.ConfigMapKeyRef
}

// Freezer connects to a live MCP server through egress, negotiates, and lists every tool within
// bounds. Errors are the libraries' own (egress, k8sbinding, mcpclient, snapshot); a refusal of
// the endpoint binding is wrapped in an error whose refusal name is StepBinding.
// ClassifyFreezeError turns them into SnapshotFrozen outcomes (any other error: a transient
// ServerUnreachable).
type Freezer interface {
	Freeze(ctx context.Context, req FreezeRequest) (*snapshot.ToolSnapshot, error)
}
