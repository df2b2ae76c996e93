package ocipack

import (
	"errors"
	"fmt"

	"github.com/b10x/connector-mcp/refusal"
	"github.com/b10x/connector-mcp/snapshot"
)

// Stable refusal names returned by (*RefusalError).Refusal (read them with [refusal.Name]).
// A refusal of the snapshot package inside a profile keeps that package's name (for example
// snapshot.RefusalInvalidUTF8, snapshot.RefusalUnsafeNumber, snapshot.RefusalDigestMismatch).
const (
	// Profile documents (reasons ErrInvalidProfile, ErrWrongContract, ErrInvalidField, ...).

	// RefusalInvalidProfile: not well-formed, strict JSON or YAML of the ProfileDocument shape.
	RefusalInvalidProfile = "invalid_profile"
	// RefusalProfileTooLarge: a profile document above the decoder's bound.
	RefusalProfileTooLarge = "profile_too_large"
	// RefusalUnknownField: a field the ProfileDocument shape does not have.
	RefusalUnknownField = "unknown_field"
	// RefusalDuplicateKey: an object repeats a member name (the snapshot package's name).
	RefusalDuplicateKey = snapshot.RefusalDuplicateKey
	// RefusalTrailingData: data after the document.
	RefusalTrailingData = "trailing_data"
	// RefusalWrongContract: the contract is not apiv1.ContractV1.
	RefusalWrongContract = "wrong_contract"
	// RefusalInvalidField: a field violates the document schema.
	RefusalInvalidField = "invalid_field"
	// RefusalUnmappedTool: a snapshot tool no operation maps.
	RefusalUnmappedTool = "unmapped_tool"
	// RefusalUnknownTool: an operation maps a tool absent from the snapshot.
	RefusalUnknownTool = "unknown_tool"
	// RefusalDuplicateMapping: two operations map the same remote tool.
	RefusalDuplicateMapping = "duplicate_mapping"
	// RefusalDuplicateOperationRef: two operations share an operationRef.
	RefusalDuplicateOperationRef = "duplicate_operation_ref"
	// RefusalUnreviewed: an effect is still the draft placeholder "unreviewed" (a draft from
	// "mcpctl profile init" or a document from "mcpctl review repin"). It is the same word as
	// the placeholder, so the refusal names what the reviewer must replace. Earlier builds
	// named this refusal "unreviewed_effect"; only the name printed changed, no file ever
	// carried it.
	RefusalUnreviewed = "unreviewed"
	// RefusalInvalidEffect: an effect outside read, write, destructive.
	RefusalInvalidEffect = "invalid_effect"

	// References, registries and packs.

	// RefusalDigestRequired: a reference names a tag, or nothing, where a digest is required.
	RefusalDigestRequired = "digest_required"
	// RefusalInvalidReference: a reference does not parse.
	RefusalInvalidReference = "invalid_reference"
	// RefusalInvalidDockerConfig: registry credentials cannot be read from a Docker config.
	RefusalInvalidDockerConfig = "invalid_docker_config"
	// RefusalPlainHTTPNotLoopback: plain HTTP to a registry that is not on a loopback address.
	RefusalPlainHTTPNotLoopback = "plain_http_not_loopback"
	// RefusalManifestTooLarge: a manifest above the store bound.
	RefusalManifestTooLarge = "manifest_too_large"
	// RefusalTooManyLayers: more layers than the bound.
	RefusalTooManyLayers = "too_many_layers"
	// RefusalLayerTooLarge: a layer above the per-layer bound.
	RefusalLayerTooLarge = "layer_too_large"
	// RefusalPackTooLarge: layers together above the total bound.
	RefusalPackTooLarge = "pack_too_large"
	// RefusalInvalidPack: a manifest that is not a profile pack.
	RefusalInvalidPack = "invalid_pack"
	// RefusalDuplicateService: two profiles of one service in a pack.
	RefusalDuplicateService = "duplicate_service"
	// RefusalProfileNotInPack: the pack holds no profile for the requested service.
	RefusalProfileNotInPack = "profile_not_in_pack"
	// RefusalAmbiguousPack: no service was named and the pack holds several profiles.
	RefusalAmbiguousPack = "ambiguous_pack"
	// RefusalBlobDigestMismatch: content that does not match the descriptor it was fetched by.
	RefusalBlobDigestMismatch = "blob_digest_mismatch"

	// Signatures, provenance and policies.

	// RefusalMissingSignature: no verifiable signature bundle referrer.
	RefusalMissingSignature = "missing_signature"
	// RefusalMissingAttestation: no provenance attestation bundle referrer.
	RefusalMissingAttestation = "missing_attestation"
	// RefusalUntrustedSignature: a signature does not verify against the trusted root or key.
	RefusalUntrustedSignature = "untrusted_signature"
	// RefusalWrongIdentity: the certificate subject does not match the policy.
	RefusalWrongIdentity = "wrong_identity"
	// RefusalWrongIssuer: the certificate OIDC issuer does not match the policy.
	RefusalWrongIssuer = "wrong_issuer"
	// RefusalWrongSubjectDigest: a statement's subject is not the pack digest.
	RefusalWrongSubjectDigest = "wrong_subject_digest"
	// RefusalWrongPredicateType: the attestation is not SLSA provenance v1.
	RefusalWrongPredicateType = "wrong_predicate_type"
	// RefusalWrongBuilder: the provenance builder id does not match the policy.
	RefusalWrongBuilder = "wrong_builder"
	// RefusalWrongSourceRepository: the provenance source repository does not match the policy.
	RefusalWrongSourceRepository = "wrong_source_repository"
	// RefusalWrongSourceRef: the provenance source ref does not match the policy.
	RefusalWrongSourceRef = "wrong_source_ref"
	// RefusalAmbiguousSource: the predicate names more than one primary source or revision.
	RefusalAmbiguousSource = "ambiguous_source"
	// RefusalMissingCertificateSource: the certificate lacks required source extensions.
	RefusalMissingCertificateSource = "missing_certificate_source"
	// RefusalWrongCertificateSourceRepository: the certified source repository does not match.
	RefusalWrongCertificateSourceRepository = "wrong_certificate_source_repository"
	// RefusalWrongCertificateSourceRef: the certified source ref does not match.
	RefusalWrongCertificateSourceRef = "wrong_certificate_source_ref"
	// RefusalPredicateDisagreesWithCertificate: the predicate's primary source differs from the
	// certified one.
	RefusalPredicateDisagreesWithCertificate = "predicate_disagrees_with_certificate"
	// RefusalMissingTlogEntry: a keyless bundle without the required transparency-log entry.
	RefusalMissingTlogEntry = "missing_tlog_entry"
	// RefusalMissingSignedTimestamp: a keyless bundle without the required signed timestamp.
	RefusalMissingSignedTimestamp = "missing_signed_timestamp"
	// RefusalInvalidPolicy: a verification policy is incomplete or contradictory.
	RefusalInvalidPolicy = "invalid_policy"
	// RefusalInvalidTrustedRoot: a trusted root that does not load (reason ErrInvalidPolicy).
	RefusalInvalidTrustedRoot = "invalid_trusted_root"
	// RefusalTrustedRootUnavailable: the trusted root of keyless verification could not be
	// fetched over TUF (reason ErrTrustedRootUnavailable; retried).
	RefusalTrustedRootUnavailable = "trusted_root_unavailable"
	// RefusalUnanchoredSubjectRegExp: a keyless subject regexp not anchored with ^ and $.
	RefusalUnanchoredSubjectRegExp = "unanchored_subject_regexp"
	// RefusalInvalidKey: a signing or verification key cannot be loaded.
	RefusalInvalidKey = "invalid_key"
)

// maxPathInError bounds a field path or identifier from a document or registry in an error
// message.
const maxPathInError = 160

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
	// ErrTrustedRootUnavailable is the reason a keyless signature could not be checked: the
	// trusted root it is verified against could not be fetched over TUF (refusal
	// "trusted_root_unavailable"). It is not a verdict on the pack: the verification is retried.
	ErrTrustedRootUnavailable = errors.New("keyless trusted root unavailable")
)

// RefusalError is a named refusal of this package. It never carries document text, registry
// credentials or remote prose: only the refusal name, an optional field path (JSON path such as
// "operations[2].effect") or bounded identifier, and the sentinel reason.
type RefusalError struct {
	// Name is the stable refusal name, one of the RefusalX constants, e.g. RefusalUnmappedTool.
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
		msg += fmt.Sprintf(" at %s", refusal.Clip(e.Path, maxPathInError))
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func refuse(name string, path string, err error) *RefusalError {
	return &RefusalError{Name: name, Path: path, Err: err}
}

// Every refusal of this package has the shared shape.
var _ refusal.Named = (*RefusalError)(nil)
