package ocipack

import (
	"errors"
	"fmt"
)

// RefusalUnreviewed is the refusal name of a profile that still carries the placeholder effect
// "unreviewed" (a draft from "mcpctl profile init" or a document from "mcpctl review repin"). It
// is the same word as the placeholder, so the refusal names what the reviewer must replace.
// Earlier builds named this refusal "unreviewed_effect"; only the name printed changed, no file
// ever carried it.
const RefusalUnreviewed = "unreviewed"

// Sentinel reasons of the package, matched with errors.Is. Every refusal is a *RefusalError whose
// Refusal method returns a stable snake_case name; its Err is one of these sentinels.
var (
	// ErrInvalidProfile is the reason for a profile document that is not well-formed, strict JSON or
	// YAML of exactly the ProfileDocument shape (refusals "invalid_profile", "unknown_field",
	// "duplicate_key", "trailing_data").
	ErrInvalidProfile = errors.New("invalid profile document")
	// ErrWrongContract is the reason for a document whose contract is not apiv1.ContractV1
	// (refusal "wrong_contract").
	ErrWrongContract = errors.New("wrong contract identity")
	// ErrUnmappedTool is the reason for a snapshot tool that no operation maps (refusal
	// "unmapped_tool").
	ErrUnmappedTool = errors.New("snapshot tool not mapped to an operation")
	// ErrUnknownTool is the reason for an operation that maps a tool absent from the snapshot
	// (refusal "unknown_tool").
	ErrUnknownTool = errors.New("operation maps a tool absent from the snapshot")
	// ErrDuplicateMapping is the reason for two operations mapping the same remote tool (refusal
	// "duplicate_mapping").
	ErrDuplicateMapping = errors.New("remote tool mapped twice")
	// ErrDuplicateOperationRef is the reason for two operations sharing an operationRef (refusal
	// "duplicate_operation_ref").
	ErrDuplicateOperationRef = errors.New("duplicate operationRef")
	// ErrUnreviewedEffect is the reason for an operation whose effect is still the draft placeholder
	// "unreviewed" (refusal "unreviewed").
	ErrUnreviewedEffect = errors.New("operation effect not reviewed")
	// ErrInvalidEffect is the reason for an effect outside read, write, destructive (refusal
	// "invalid_effect").
	ErrInvalidEffect = errors.New("invalid operation effect")
	// ErrInvalidField is the reason for a field that violates the document schema (empty required
	// value, bad pattern, too long; refusal "invalid_field").
	ErrInvalidField = errors.New("invalid field")
	// ErrSnapshotMismatch is the reason for recorded digests that differ from the ones reconstructed
	// from the recorded descriptors (refusal "digest_mismatch"), or a recorded descriptor that is
	// itself refused (the snapshot package's refusal name is kept).
	ErrSnapshotMismatch = errors.New("recorded snapshot does not reconstruct")

	// ErrDigestRequired is the reason for a reference that names a tag, or nothing, where an
	// immutable digest is required (refusal "digest_required").
	ErrDigestRequired = errors.New("reference must pin a sha256 digest")
	// ErrInvalidReference is the reason for a reference that does not parse (refusal
	// "invalid_reference").
	ErrInvalidReference = errors.New("invalid OCI reference")
	// ErrInvalidDockerConfig is the reason registry credentials cannot be read from a Docker config
	// or dockerconfigjson Secret (refusal "invalid_docker_config").
	ErrInvalidDockerConfig = errors.New("invalid docker config")
	// ErrPlainHTTPNotLoopback is the reason plain HTTP is refused for a registry that is not on a
	// loopback address (refusal "plain_http_not_loopback").
	ErrPlainHTTPNotLoopback = errors.New("plain HTTP is allowed only for loopback registries")
	// ErrManifestTooLarge is the reason for a manifest above the store bound (refusal
	// "manifest_too_large").
	ErrManifestTooLarge = errors.New("manifest too large")
	// ErrTooManyLayers is the reason for a pack with more layers than the bound (refusal
	// "too_many_layers").
	ErrTooManyLayers = errors.New("too many layers")
	// ErrLayerTooLarge is the reason for a layer above the per-layer bound (refusal
	// "layer_too_large").
	ErrLayerTooLarge = errors.New("layer too large")
	// ErrPackTooLarge is the reason for a pack whose layers together exceed the total bound
	// (refusal "pack_too_large").
	ErrPackTooLarge = errors.New("pack too large")
	// ErrInvalidPack is the reason for a manifest that is not a profile pack: wrong media type,
	// artifactType, config or layer media type, or malformed JSON (refusal "invalid_pack"); or
	// for two profiles of one service in a pack (refusal "duplicate_service").
	ErrInvalidPack = errors.New("not a profile pack")
	// ErrProfileNotInPack is the reason a pack holds no profile for the requested service, or
	// several when one was expected (refusals "profile_not_in_pack", "ambiguous_pack").
	ErrProfileNotInPack = errors.New("profile not in pack")
	// ErrBlobDigestMismatch is the reason for content that does not match the descriptor it was
	// fetched by: bytes that do not hash to its digest, or another size, read or declared
	// (refusal "blob_digest_mismatch": a tampered layer, manifest or referrer).
	ErrBlobDigestMismatch = errors.New("content does not match its digest")

	// ErrNoSignature is the reason for a pack without a verifiable signature bundle referrer
	// (refusal "missing_signature").
	ErrNoSignature = errors.New("no signature bundle")
	// ErrNoAttestation is the reason for a pack without a provenance attestation bundle referrer
	// (refusal "missing_attestation").
	ErrNoAttestation = errors.New("no provenance attestation")
	// ErrUntrustedSignature is the reason a bundle's signature does not verify against the trusted
	// root or key (refusal "untrusted_signature").
	ErrUntrustedSignature = errors.New("signature not trusted")
	// ErrWrongIdentity is the reason the certificate subject does not match the policy (refusal
	// "wrong_identity").
	ErrWrongIdentity = errors.New("signer identity does not match policy")
	// ErrWrongIssuer is the reason the certificate OIDC issuer does not match the policy (refusal
	// "wrong_issuer").
	ErrWrongIssuer = errors.New("signer issuer does not match policy")
	// ErrWrongSubjectDigest is the reason a statement's subject is not the pack digest (refusal
	// "wrong_subject_digest": a signature over another digest).
	ErrWrongSubjectDigest = errors.New("signed subject is not the pack digest")
	// ErrWrongPredicateType is the reason the attestation is not SLSA provenance v1 (refusal
	// "wrong_predicate_type").
	ErrWrongPredicateType = errors.New("attestation predicate is not SLSA provenance v1")
	// ErrWrongBuilder is the reason the provenance builder id does not match the policy (refusal
	// "wrong_builder").
	ErrWrongBuilder = errors.New("provenance builder does not match policy")
	// ErrWrongSourceRepository is the reason the provenance source repository does not match the
	// policy (refusal "wrong_source_repository").
	ErrWrongSourceRepository = errors.New("provenance source repository does not match policy")
	// ErrWrongSourceRef is the reason the provenance source ref does not match the policy (refusal
	// "wrong_source_ref": not built from the reviewed branch).
	ErrWrongSourceRef = errors.New("provenance source ref does not match policy")
	// ErrInvalidPolicy is the reason a verification policy is incomplete or contradictory (refusal
	// "invalid_policy").
	ErrInvalidPolicy = errors.New("invalid verification policy")
	// ErrInvalidKey is the reason a signing or verification key cannot be loaded (refusal
	// "invalid_key").
	ErrInvalidKey = errors.New("invalid key")
	// ErrUnanchoredSubjectRegExp is the reason a keyless subject regular expression does not start
	// with "^" and end with "$" (refusal "unanchored_subject_regexp"): an unanchored expression
	// matches identities the policy author never meant.
	ErrUnanchoredSubjectRegExp = errors.New("subject regular expression is not anchored")
	// ErrAmbiguousSource is the reason an SLSA predicate names two different primary sources
	// (externalParameters.workflow and externalParameters.source disagree) or two revisions of
	// its primary source (refusal "ambiguous_source").
	ErrAmbiguousSource = errors.New("provenance names more than one primary source")
	// ErrCertificateSource is the reason the source certified by the Fulcio certificate extensions
	// does not match the policy (refusals "wrong_certificate_source_repository",
	// "wrong_certificate_source_ref"), or is absent where it is required (refusal
	// "missing_certificate_source").
	ErrCertificateSource = errors.New("certified source does not match policy")
	// ErrPredicateDisagreesWithCertificate is the reason the provenance predicate's primary
	// source (repository, ref or revision) differs from the one the Fulcio certificate certified
	// (refusal "predicate_disagrees_with_certificate").
	ErrPredicateDisagreesWithCertificate = errors.New("provenance disagrees with the certified source")
	// ErrMissingTransparency is the reason a keyless bundle lacks the transparency evidence the
	// verifier requires (refusals "missing_tlog_entry", "missing_signed_timestamp").
	ErrMissingTransparency = errors.New("keyless signature lacks required transparency evidence")
)

// RefusalError is a named refusal of this package. It never carries document text, registry
// credentials or remote prose: only the refusal name, an optional field path (JSON path such as
// "operations[2].effect") or bounded identifier, and the sentinel reason.
type RefusalError struct {
	// Name is the stable refusal name, e.g. "unmapped_tool".
	Name string
	// Path locates the offending field or item when known (a JSON path, a tool name, a digest).
	Path string
	// Err is the sentinel reason, matched with errors.Is; it may wrap a lower-level refusal.
	Err error
}

// Refusal returns the stable refusal name.
func (e *RefusalError) Refusal() string { return e.Name }

// Unwrap returns the reason.
func (e *RefusalError) Unwrap() error { return e.Err }

func (e *RefusalError) Error() string {
	msg := "ocipack: " + e.Name
	if e.Path != "" {
		msg += fmt.Sprintf(" at %s", clip(e.Path))
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func refuse(name string, path string, err error) *RefusalError {
	return &RefusalError{Name: name, Path: path, Err: err}
}

// clip bounds an identifier that may come from a document or a remote before it goes into an
// error message.
func clip(s string) string {
	const max = 160
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
