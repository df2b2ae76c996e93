package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EndpointRefMCPConnection is the only endpoint reference an operation may carry: the
// deployment's reviewed MCP connection.
const EndpointRefMCPConnection = "mcp_connection"

// ServiceDeploymentSpec binds a reviewed profile into service.
type ServiceDeploymentSpec struct {
	// ProfileRef names the McpServiceProfile (same namespace) this deployment serves.
	ProfileRef LocalObjectReference `json:"profileRef"`

	// ProviderID is the permanent provider identity of this deployment. Two deployments never
	// share one.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="providerID is immutable"
	ProviderID string `json:"providerID"`

	// MCPConnection is the reviewed endpoint binding: where the server lives and how egress
	// reaches it. Operations refer to it as "mcp_connection".
	MCPConnection MCPConnection `json:"mcpConnection"`

	// Operations binds each operation of the profile: endpoint, credential, grants, exposure.
	// The set must equal the profile's operation set exactly.
	// +listType=map
	// +listMapKey=operationRef
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=512
	Operations []OperationBinding `json:"operations"`

	// Suspend stops reconciliation (no freeze, no re-verification) while true.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
}

// MCPConnection is the remote MCP endpoint (Streamable HTTP) and its egress policy.
type MCPConnection struct {
	// URL is the Streamable HTTP endpoint. HTTPS is required; plain HTTP only to loopback when
	// the cluster policy allows it (development). Configuration names sources, never values:
	// userinfo (user:pass@) and a fragment are refused, here and by the controller. A query
	// string is allowed but is not for secrets: it is part of the reviewed endpoint, visible to
	// everyone who may read the object (name a bearer with credentialRef instead).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.matches('^https?://[^[:space:]]+$')",message="must be an http or https URL without whitespace",reason=FieldValueForbidden
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[a-zA-Z][a-zA-Z0-9+.-]*://[^/?#]*@')",message="must not carry userinfo (user:pass@): configuration names sources, never values; name a bearer with credentialRef (endpoint_userinfo)",reason=FieldValueForbidden
	// +kubebuilder:validation:XValidation:rule="!self.contains('#')",message="must not carry a fragment (#...) (endpoint_fragment)",reason=FieldValueForbidden
	URL string `json:"url"`

	// CABundleRef names a ConfigMap key (same namespace) holding the PEM CA certificates of a
	// private CA: the endpoint's certificate is verified against these roots only, in place of
	// the cluster's. The ConfigMap must carry the label connectors.b10x.io/ca-bundle=true (the
	// operator sees no other ConfigMap). Verification is never turned off.
	// +optional
	CABundleRef *ConfigMapKeyRef `json:"caBundleRef,omitempty"`

	// CredentialRef names the Secret key holding an optional bearer token for this endpoint.
	// It is read per exchange and never leaves the egress port.
	// +optional
	CredentialRef *CredentialRef `json:"credentialRef,omitempty"`

	// Egress narrows or widens the cluster egress policy for this endpoint.
	// +optional
	Egress EgressPolicy `json:"egress,omitempty"`
}

// CredentialRef addresses one key of a Secret in the deployment's own namespace.
type CredentialRef struct {
	// Name of the Secret (same namespace; no cross-namespace references).
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

// ConfigMapKeyRef addresses one key of a ConfigMap in the deployment's own namespace.
type ConfigMapKeyRef struct {
	// Name of the ConfigMap (same namespace; no cross-namespace references).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Name string `json:"name"`

	// Key within the ConfigMap's data.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key"`
}

// CABundleLabel is the label (value "true") a ConfigMap must carry to be usable as a
// connection's CA bundle (spec.mcpConnection.caBundleRef): the operator's ConfigMap cache
// holds only ConfigMaps so labelled.
const CABundleLabel = "connectors.b10x.io/ca-bundle"

// EgressPolicy is the per-endpoint part of the egress policy.
type EgressPolicy struct {
	// AllowCIDRs lists private ranges (e.g. an in-cluster service network) the resolved
	// endpoint address may fall in. Public addresses need no entry; loopback, link-local,
	// metadata and unspecified addresses are always refused in hosted mode.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=43
	AllowCIDRs []string `json:"allowCIDRs,omitempty"`
}

// OperationBinding binds one operation of the profile into service.
type OperationBinding struct {
	// OperationRef is the profile's operation reference.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	OperationRef string `json:"operationRef"`

	// EndpointRef must be exactly "mcp_connection" (checked by the binding stage).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	EndpointRef string `json:"endpointRef"`

	// CredentialRef must equal the connection's credential reference exactly (checked by the
	// binding stage); omit it when the connection has none.
	// +optional
	CredentialRef *CredentialRef `json:"credentialRef,omitempty"`

	// GrantRefs name RoleBindings in this namespace whose role allows the verb "invoke" on
	// servicedeployments in group connectors.b10x.io for this deployment.
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=253
	GrantRefs []string `json:"grantRefs"`

	// Expose makes the operation callable. Deny by default: a mapped operation stays hidden
	// until it is exposed explicitly.
	// +optional
	// +kubebuilder:default=false
	Expose bool `json:"expose"`

	// Approval says whether a call waits for someone allowed to approve it (docs/approval.md):
	// Required or None. Unset: the reviewed effect decides (destructive: Required; read and
	// write: None). An McpTrustPolicy selecting the namespace can make Required a floor for
	// destructive operations, which None does not lower. The server's annotations never decide it.
	// +optional
	Approval ApprovalMode `json:"approval,omitempty"`
}

// ServiceDeploymentStatus is the observed state of the activation pipeline.
type ServiceDeploymentStatus struct {
	// ObservedGeneration is the generation last activated successfully.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions are kstatus-compatible: Ready, Reconciling, Stalled, plus the stage conditions
	// ProfileVerified, SnapshotFrozen, SnapshotMatched and Bound.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ProfileDigest is the digest of the profile document this deployment activated.
	// +optional
	// +kubebuilder:validation:MaxLength=71
	ProfileDigest string `json:"profileDigest,omitempty"`

	// ActiveSnapshotDigest is the frozen snapshot digest that is the active authority surface.
	// +optional
	// +kubebuilder:validation:MaxLength=71
	ActiveSnapshotDigest string `json:"activeSnapshotDigest,omitempty"`

	// CandidateSnapshotDigest is the live snapshot digest observed on drift, kept for review.
	// +optional
	// +kubebuilder:validation:MaxLength=71
	CandidateSnapshotDigest string `json:"candidateSnapshotDigest,omitempty"`

	// Drift is the difference between the reviewed and the live snapshot, when they differ.
	// +optional
	Drift *SnapshotDrift `json:"drift,omitempty"`

	// LastFrozenTime is when the live tool list was last frozen.
	// +optional
	LastFrozenTime *metav1.Time `json:"lastFrozenTime,omitempty"`

	// CredentialHash is a hash of the referenced credential's value (never the value), so a
	// rotation is noticed.
	// +optional
	// +kubebuilder:validation:MaxLength=71
	CredentialHash string `json:"credentialHash,omitempty"`

	// ExposedOperations is the number of operations callable through this deployment.
	// +optional
	ExposedOperations int32 `json:"exposedOperations,omitempty"`
}

// SnapshotDrift is the difference between a reviewed and a live snapshot, by names and digests.
type SnapshotDrift struct {
	// ProtocolFrom is the reviewed protocol revision when the live one differs.
	// +optional
	// +kubebuilder:validation:MaxLength=10
	ProtocolFrom string `json:"protocolFrom,omitempty"`

	// ProtocolTo is the live protocol revision when it differs from the reviewed one.
	// +optional
	// +kubebuilder:validation:MaxLength=10
	ProtocolTo string `json:"protocolTo,omitempty"`

	// Added are live tools the review does not know.
	// +optional
	// +kubebuilder:validation:MaxItems=512
	Added []ToolRef `json:"added,omitempty"`

	// Removed are reviewed tools the live server no longer lists.
	// +optional
	// +kubebuilder:validation:MaxItems=512
	Removed []ToolRef `json:"removed,omitempty"`

	// Changed are tools whose descriptor digest changed.
	// +optional
	// +kubebuilder:validation:MaxItems=512
	Changed []ChangedTool `json:"changed,omitempty"`

	// Classes counts tools per drift class (text_only, schema_widened, schema_narrowed,
	// annotation_changed, new_tool, removed_tool, protocol_change, other_field; see package
	// review). Informational only: any drift refuses activation whatever its class.
	// +optional
	Classes map[string]int32 `json:"classes,omitempty"`
}

// ToolRef names a tool and its descriptor digest.
type ToolRef struct {
	// Name is the remote tool name.
	// +kubebuilder:validation:MaxLength=128
	Name string `json:"name"`
	// Digest is the descriptor digest.
	// +kubebuilder:validation:MaxLength=71
	Digest string `json:"digest"`
}

// ChangedTool names a tool whose descriptor digest changed.
type ChangedTool struct {
	// Name is the remote tool name.
	// +kubebuilder:validation:MaxLength=128
	Name string `json:"name"`
	// From is the reviewed descriptor digest.
	// +kubebuilder:validation:MaxLength=71
	From string `json:"from"`
	// To is the live descriptor digest.
	// +kubebuilder:validation:MaxLength=71
	To string `json:"to"`
}

// ServiceDeployment binds a reviewed McpServiceProfile into service against a live endpoint,
// activating only when the live tool list equals the reviewed one.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sdep,categories={connectors,mcp}
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Snapshot",type=string,JSONPath=`.status.activeSnapshotDigest`
// +kubebuilder:printcolumn:name="Profile",type=string,JSONPath=`.spec.profileRef.name`,priority=1
// +kubebuilder:printcolumn:name="Candidate",type=string,JSONPath=`.status.candidateSnapshotDigest`,priority=1
// +kubebuilder:printcolumn:name="Exposed",type=integer,JSONPath=`.status.exposedOperations`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ServiceDeployment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the binding.
	Spec ServiceDeploymentSpec `json:"spec"`

	// Status is the observed activation state.
	// +optional
	Status ServiceDeploymentStatus `json:"status,omitempty"`
}

// ServiceDeploymentList is a list of ServiceDeployment.
//
// +kubebuilder:object:root=true
type ServiceDeploymentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the deployments.
	Items []ServiceDeployment `json:"items"`
}
