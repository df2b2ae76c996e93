package controllers

import (
	"errors"
	"fmt"
)

// Condition types shared by both kinds. Ready, Reconciling and Stalled are the kstatus
// conditions; the others are the activation pipeline's stage conditions.
const (
	// TypeReady is True when the object is active (deployment) or verified (profile).
	TypeReady = "Ready"
	// TypeReconciling is True while work is in progress or a transient failure is being retried.
	TypeReconciling = "Reconciling"
	// TypeStalled is True when a refusal needs a human to change something.
	TypeStalled = "Stalled"
	// TypeSourceVerified is the profile's source verification stage.
	TypeSourceVerified = "SourceVerified"
	// TypeSnapshotMatched is, on a profile, the reconstruction of the recorded snapshot digest,
	// and, on a deployment, the typed equality of the live and the reviewed snapshot.
	TypeSnapshotMatched = "SnapshotMatched"
	// TypeProfileVerified is the deployment's check that its profile is verified and current.
	TypeProfileVerified = "ProfileVerified"
	// TypeBound is the deployment's binding checks, grants and collision rules.
	TypeBound = "Bound"
	// TypeSnapshotFrozen is the deployment's live freeze through egress.
	TypeSnapshotFrozen = "SnapshotFrozen"
)

// Condition reasons. Each is a stable CamelCase name and also the reason of the event emitted
// when it first appears.
const (
	// ReasonSucceeded marks a stage that passed.
	ReasonSucceeded = "Succeeded"
	// ReasonProgressing marks work in progress.
	ReasonProgressing = "Progressing"
	// ReasonVerified marks a verified profile.
	ReasonVerified = "Verified"
	// ReasonActivated marks an active deployment.
	ReasonActivated = "Activated"
	// ReasonSuspended marks a suspended deployment.
	ReasonSuspended = "Suspended"

	// ReasonInlineSourceRefused: the cluster requires pack provenance and the profile is inline.
	ReasonInlineSourceRefused = "InlineSourceRefused"
	// ReasonVerificationFailed: the pack failed signature, identity or provenance verification.
	ReasonVerificationFailed = "VerificationFailed"
	// ReasonUntrustedSigner: no trust source applies to the profile's namespace (refusal
	// "no_trust_source"): the manager has no platform policy and no McpTrustPolicy selects the
	// namespace, or none that does lists both a signer and a provenance rule.
	ReasonUntrustedSigner = "UntrustedSigner"
	// ReasonProvenanceMissing: no signature or attestation was found for the pack.
	ReasonProvenanceMissing = "ProvenanceMissing"
	// ReasonPackInvalid: the pack or its profile document failed strict decoding or validation.
	ReasonPackInvalid = "PackInvalid"
	// ReasonRegistryUnavailable: the registry could not be reached (retried).
	ReasonRegistryUnavailable = "RegistryUnavailable"
	// ReasonProfileInvalid: the profile document is not a reviewed, complete profile.
	ReasonProfileInvalid = "ProfileInvalid"
	// ReasonSnapshotDigestMismatch: the recorded digests do not reconstruct.
	ReasonSnapshotDigestMismatch = "SnapshotDigestMismatch"

	// ReasonProfileNotFound: the referenced profile does not exist (retried on its creation).
	ReasonProfileNotFound = "ProfileNotFound"
	// ReasonProfileNotReady: the referenced profile is not verified or not current.
	ReasonProfileNotReady = "ProfileNotReady"
	// ReasonOperationSetMismatch: the deployment's operations differ from the profile's.
	ReasonOperationSetMismatch = "OperationSetMismatch"
	// ReasonEndpointRefInvalid: an operation's endpointRef is not "mcp_connection".
	ReasonEndpointRefInvalid = "EndpointRefInvalid"
	// ReasonCredentialRefMismatch: an operation's credentialRef differs from the connection's.
	ReasonCredentialRefMismatch = "CredentialRefMismatch" //nolint:gosec // a condition reason, not a credential
	// ReasonGrantNotFound: a referenced RoleBinding (or its role) does not exist.
	ReasonGrantNotFound = "GrantNotFound"
	// ReasonGrantDenied: a referenced RoleBinding's role does not allow invoke on this deployment.
	ReasonGrantDenied = "GrantDenied"
	// ReasonProviderCollision: another deployment holds this providerID.
	ReasonProviderCollision = "ProviderCollision"
	// ReasonAuthorityCollision: another deployment holds this endpoint.
	ReasonAuthorityCollision = "AuthorityCollision"
	// ReasonOperationCollision: another deployment serves an operation of the same Connection.
	ReasonOperationCollision = "OperationCollision"
	// ReasonEndpointRefused: the endpoint URL is not acceptable to the cluster egress policy.
	ReasonEndpointRefused = "EndpointRefused"
	// ReasonCredentialNotFound: the referenced Secret or key does not exist (retried).
	ReasonCredentialNotFound = "CredentialNotFound" //nolint:gosec // a condition reason, not a credential
	// ReasonCredentialRefused: the referenced Secret may not be spent for this endpoint (its
	// allowed-hosts annotation does not name the endpoint's host, or it is a ServiceAccount
	// token). Not retried: the Secret or the deployment must change.
	ReasonCredentialRefused = "CredentialRefused" //nolint:gosec // a condition reason, not a credential
	// ReasonCABundleNotFound: the connection's CA bundle ConfigMap (labelled
	// connectors.b10x.io/ca-bundle=true) or its key does not exist (retried).
	ReasonCABundleNotFound = "CABundleNotFound"
	// ReasonServerUnreachable: the live freeze failed on a transport error (retried).
	ReasonServerUnreachable = "ServerUnreachable"
	// ReasonFreezeRefused: the live freeze hit a named refusal (bounds, egress policy, protocol).
	ReasonFreezeRefused = "FreezeRefused"
	// ReasonSnapshotDrift: the live snapshot differs from the reviewed one.
	ReasonSnapshotDrift = "SnapshotDrift"
)

// ErrStage is matched by every *StageError.
var ErrStage = errors.New("activation stage refused")

// StageError is the outcome of a stage that did not pass. Reason becomes the condition and event
// reason; Message is safe to show (no secrets, URL userinfo or query, or server prose).
type StageError struct {
	// Condition is the stage condition type the error belongs to.
	Condition string
	// Reason is the CamelCase reason.
	Reason string
	// Message is the sanitized human-readable explanation.
	Message string
	// Transient marks failures that are retried (Reconciling) rather than needing a human
	// (Stalled).
	Transient bool
	// Err is the underlying cause, for logs and errors.Is; never shown in conditions.
	Err error
}

func (e *StageError) Error() string {
	return fmt.Sprintf("%s %s: %s", e.Condition, e.Reason, e.Message)
}

// Unwrap returns ErrStage and the cause.
func (e *StageError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrStage}
	}
	return []error{ErrStage, e.Err}
}

func refuse(condition, reason, format string, args ...any) *StageError {
	return &StageError{Condition: condition, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

func retry(condition, reason string, err error, format string, args ...any) *StageError {
	return &StageError{Condition: condition, Reason: reason, Message: fmt.Sprintf(format, args...), Transient: true, Err: err}
}
