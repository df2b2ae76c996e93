package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// McpServiceProfileSpec says where the reviewed profile document comes from.
type McpServiceProfileSpec struct {
	// Source is the profile's origin: an OCI pack pinned by digest (production), or an inline
	// document (development; a cluster policy can refuse it).
	Source ProfileSource `json:"source"`
}

// ProfileSource holds exactly one of OCI or Inline.
// +kubebuilder:validation:XValidation:rule="has(self.oci) != has(self.inline)",message="exactly one of source.oci or source.inline must be set"
type ProfileSource struct {
	// OCI is a profile pack pulled by digest and verified against a provenance policy.
	// +optional
	OCI *OCISource `json:"oci,omitempty"`

	// Inline is the profile document itself (development only).
	// +optional
	Inline *ProfileDocument `json:"inline,omitempty"`
}

// OCISource names a profile pack by immutable digest.
type OCISource struct {
	// Ref is "REPOSITORY@sha256:<hex>", e.g. "registry.example.com/team/github@sha256:...".
	// A tag is never trusted and is rejected; a registry port is only accepted before a path, so
	// "name:123@sha256:..." (a numeric tag) is rejected too.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[a-z0-9]+(([._]|__|[-]+)[a-z0-9]+)*((:[0-9]+)?(/[a-z0-9]+(([._]|__|[-]+)[a-z0-9]+)*)+)?@sha256:[a-f0-9]{64}$`
	Ref string `json:"ref"`

	// PullSecretRef names a kubernetes.io/dockerconfigjson Secret in this namespace holding
	// registry credentials. The Secret must opt in like a deployment's credential: label
	// connectors.b10x.io/credential=true, not a ServiceAccount token, and its
	// connectors.b10x.io/allowed-hosts annotation must name the registry host of ref.
	// +optional
	PullSecretRef *LocalObjectReference `json:"pullSecretRef,omitempty"`

	// Verify is the provenance policy. When omitted, the cluster's default policy applies.
	// +optional
	Verify *VerifyPolicy `json:"verify,omitempty"`
}

// LocalObjectReference names an object in the same namespace.
type LocalObjectReference struct {
	// Name of the referenced object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Name string `json:"name"`
}

// VerifyPolicy is a profile's own sigstore identity and SLSA provenance (merge verification)
// requirements. They only ADD to the cluster's trust: a pack must first satisfy one trust source
// that applies to the profile's namespace (the manager's platform policy or an McpTrustPolicy
// selecting it), and then this policy too. It is never trusted on its own.
// +kubebuilder:validation:XValidation:rule="!(has(self.keyless) && has(self.publicKey))",message="at most one of verify.keyless or verify.publicKey may be set; when neither is, the profile adds no signer requirement"
type VerifyPolicy struct {
	// Keyless additionally requires a signature by this Fulcio certificate identity.
	// +optional
	Keyless *KeylessIdentity `json:"keyless,omitempty"`

	// PublicKey additionally requires a signature by the PEM public key in this Secret of the
	// profile's namespace. The Secret must carry the label connectors.b10x.io/credential=true
	// and must not be a ServiceAccount token.
	// +optional
	PublicKey *SecretKeyReference `json:"publicKey,omitempty"`

	// Provenance additionally requires this SLSA provenance v1 merge verification, checked with
	// the signer named here or, when none is, the trusted signer that satisfied the trust source.
	// +optional
	Provenance *ProvenancePolicy `json:"provenance,omitempty"`
}

// KeylessIdentity is an OIDC issuer plus an exact subject or an anchored subject regular
// expression.
// +kubebuilder:validation:XValidation:rule="has(self.subject) != has(self.subjectRegExp)",message="exactly one of subject or subjectRegExp must be set"
// +kubebuilder:validation:XValidation:rule="!has(self.subjectRegExp) || (self.subjectRegExp.startsWith('^') && self.subjectRegExp.endsWith('$'))",message="subjectRegExp must be anchored: start with ^ and end with $ (unanchored_subject_regexp)"
type KeylessIdentity struct {
	// Issuer is the exact OIDC issuer URL of the signing identity.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Issuer string `json:"issuer"`

	// Subject is the exact certificate subject (SAN), e.g. a workflow identity.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Subject string `json:"subject,omitempty"`

	// SubjectRegExp is a Go regular expression the whole certificate subject must match. It
	// must be anchored: start with "^" and end with "$" (admission checks the text); the manager
	// also checks every branch on the syntax tree, so "^a|b$" is refused.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	SubjectRegExp string `json:"subjectRegExp,omitempty"`
}

// SecretKeyReference names one key of a Secret in the same namespace.
type SecretKeyReference struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Name string `json:"name"`

	// Key within the Secret's data.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key"`
}

// ProvenancePolicy constrains the SLSA provenance v1 attestation of a pack: who built it and from
// which source repository and ref (the merge verification).
type ProvenancePolicy struct {
	// BuilderID is the exact builder.id the provenance must name.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	BuilderID string `json:"builderID,omitempty"`

	// SourceRepository is the exact source repository URI, e.g. "git+https://github.com/org/repo".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	SourceRepository string `json:"sourceRepository"`

	// SourceRef is the exact reviewed, protected ref, e.g. "refs/heads/main".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	SourceRef string `json:"sourceRef"`
}

// McpServiceProfileStatus is the observed, verified state of a profile.
type McpServiceProfileStatus struct {
	// ObservedGeneration is the generation last verified successfully.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions are kstatus-compatible: Ready, Reconciling, Stalled, plus the stage conditions
	// SourceVerified and SnapshotReconstructed (written as SnapshotMatched before it was renamed;
	// a stale SnapshotMatched is removed when the profile's status is next written).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// PackDigest is the resolved pack manifest digest (OCI sources).
	// +optional
	// +kubebuilder:validation:MaxLength=71
	PackDigest string `json:"packDigest,omitempty"`

	// ProfileDigest is the digest of the verified profile document's canonical form.
	// +optional
	// +kubebuilder:validation:MaxLength=71
	ProfileDigest string `json:"profileDigest,omitempty"`

	// SnapshotDigest is the reconstructed and matched snapshot digest.
	// +optional
	// +kubebuilder:validation:MaxLength=71
	SnapshotDigest string `json:"snapshotDigest,omitempty"`

	// Verified records who signed the pack and how it was built.
	// +optional
	Verified *VerifiedProvenance `json:"verified,omitempty"`
}

// VerifiedProvenance is the verified signer identity and build provenance of a pack.
type VerifiedProvenance struct {
	// Issuer is the verified OIDC issuer (keyless), empty for public keys.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Issuer string `json:"issuer,omitempty"`

	// Subject is the verified certificate subject (keyless) or the public key's hint.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Subject string `json:"subject,omitempty"`

	// BuilderID is the builder.id of the verified provenance.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	BuilderID string `json:"builderID,omitempty"`

	// SourceRepository is the verified source repository.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	SourceRepository string `json:"sourceRepository,omitempty"`

	// SourceRef is the verified source ref.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	SourceRef string `json:"sourceRef,omitempty"`

	// SourceRevision is the verified source revision (commit).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	SourceRevision string `json:"sourceRevision,omitempty"`

	// TrustSource is the trust source the pack satisfied: "platform" (the manager's flags) or
	// "McpTrustPolicy/<name>".
	// +optional
	// +kubebuilder:validation:MaxLength=320
	TrustSource string `json:"trustSource,omitempty"`

	// Signer is the name of the trusted signer (within TrustSource) whose signature verified.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Signer string `json:"signer,omitempty"`

	// WaivedChecks lists the verification checks this manager waives by an unsafe flag
	// (e.g. "provenance", "keyless_tlog"). Empty on a manager that waives nothing.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=63
	WaivedChecks []string `json:"waivedChecks,omitempty"`
}

// McpServiceProfile is a reviewed, pinned description of one MCP server's tool surface.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mcpsp,categories={connectors,mcp}
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Snapshot",type=string,JSONPath=`.status.snapshotDigest`
// +kubebuilder:printcolumn:name="Pack",type=string,JSONPath=`.status.packDigest`,priority=1
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.status.verified.sourceRevision`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type McpServiceProfile struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec says where the reviewed profile comes from.
	Spec McpServiceProfileSpec `json:"spec"`

	// Status is the verified state.
	// +optional
	Status McpServiceProfileStatus `json:"status,omitempty"`
}

// McpServiceProfileList is a list of McpServiceProfile.
//
// +kubebuilder:object:root=true
type McpServiceProfileList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the profiles.
	Items []McpServiceProfile `json:"items"`
}
