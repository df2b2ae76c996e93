package v1

// Condition types of the connector-mcp kinds. Ready, Reconciling and Stalled are the kstatus
// conditions every kind writes; the others are the stage conditions of the activation pipeline.
// The string values are part of the API and never change.
const (
	// ConditionReady is True when the object is active (ServiceDeployment), verified
	// (McpServiceProfile), holds a fresh token (McpCredential) or is a valid grant
	// (McpTrustPolicy).
	ConditionReady = "Ready"
	// ConditionReconciling is True while work is in progress or a transient failure is being
	// retried.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when a refusal needs a human to change something.
	ConditionStalled = "Stalled"
	// ConditionSourceVerified is the McpServiceProfile's source verification stage (pack
	// signature and provenance, or the inline-source rule) and the strict checks of its
	// document.
	ConditionSourceVerified = "SourceVerified"
	// ConditionSnapshotReconstructed is the McpServiceProfile's reconstruction stage: every
	// recorded descriptor digest and the snapshot digest reconstruct from the recorded
	// descriptors. Managers before it wrote this stage as SnapshotMatched on profiles; the
	// profile reconciler removes that stale condition whenever it writes a profile's status.
	ConditionSnapshotReconstructed = "SnapshotReconstructed"
	// ConditionSnapshotMatched is the ServiceDeployment's match stage: the typed equality of the
	// live and the reviewed snapshot (protocol revision, descriptor digests, snapshot digest).
	// It is written on ServiceDeployments only.
	ConditionSnapshotMatched = "SnapshotMatched"
	// ConditionProfileVerified is the ServiceDeployment's check that its profile is verified
	// and current.
	ConditionProfileVerified = "ProfileVerified"
	// ConditionBound is the ServiceDeployment's binding checks, grants and collision rules.
	ConditionBound = "Bound"
	// ConditionSnapshotFrozen is the ServiceDeployment's live freeze through egress.
	ConditionSnapshotFrozen = "SnapshotFrozen"
)

// Reasons of the McpServiceProfile and ServiceDeployment conditions. Each is a stable CamelCase
// name and also the reason of the event emitted when it first appears.
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
	// ReasonTrustedRootUnavailable: the trusted root of keyless verification could not be fetched
	// over TUF (retried).
	ReasonTrustedRootUnavailable = "TrustedRootUnavailable"
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

// Reasons of the McpCredential Ready condition (also the events' reasons and, except
// TokenFresh, the target Secret's connectors.b10x.io/credential-state).
const (
	// ReasonTokenFresh: the target Secret holds an access token that is not yet due for refresh.
	ReasonTokenFresh = "TokenFresh"
	// ReasonReauthorizationRequired: the authorization server answered invalid_grant; a human
	// must run "mcpctl login --to-secret" again. Stalled. The same string is the target
	// Secret's credential-state that internal/k8sbinding refuses to spend.
	ReasonReauthorizationRequired = "ReauthorizationRequired"
	// ReasonIssuerMismatch: the resource no longer names the issuer, the issuer's metadata is
	// not its own, or its token endpoint is on another origin. Stalled; nothing was sent.
	ReasonIssuerMismatch = "IssuerMismatch"
	// ReasonResourceMismatch: the protected-resource metadata describes another resource.
	// Stalled; nothing was sent.
	ReasonResourceMismatch = "ResourceMismatch"
	// ReasonInsufficientScope: the grant lacks a requested scope (named in the message and in
	// status.missingScopes); a human must log in again with it. Stalled: no silent escalation.
	ReasonInsufficientScope = "InsufficientScope"
	// ReasonSecretRefused: the refresh-token or client-secret Secret is missing, not labelled
	// connectors.b10x.io/credential=true, a ServiceAccount token, or lacks its key. Retried when
	// the Secret changes.
	ReasonSecretRefused = "SecretRefused"
	// ReasonTargetSecretConflict: a Secret of the target name exists that this McpCredential
	// did not create; it is never taken over. Stalled.
	ReasonTargetSecretConflict = "TargetSecretConflict"
	// ReasonRefreshFailed: the token request failed for another reason (transport, egress
	// refusal, server error); retried.
	ReasonRefreshFailed = "RefreshFailed"
	// ReasonIssuerNotAllowed: spec.issuer is outside the namespace's OAuth issuer ceiling (the
	// manager's --allowed-oauth-issuers and the spec.oauth.allowedIssuers of the McpTrustPolicies
	// that select the namespace). Nothing was sent; retried, since a trust policy may allow it.
	ReasonIssuerNotAllowed = "IssuerNotAllowed"
	// ReasonResourceNotAllowed: spec.resource is not an https URL (plain http only to a loopback
	// address). Stalled; nothing was sent.
	ReasonResourceNotAllowed = "ResourceNotAllowed"
)

// Reasons of the McpTrustPolicy Ready condition.
const (
	// ReasonValidGrant: every field of the policy is valid; it grants what it says.
	ReasonValidGrant = "Valid"
	// ReasonInvalidGrant: a field (named in the message) is invalid; Stalled is True too.
	ReasonInvalidGrant = "InvalidGrant"
)
